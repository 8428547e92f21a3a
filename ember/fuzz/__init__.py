"""The differential fuzzer (`ember-fuzz`, `make fuzz`): it generates `.dae` programs with hypothesis and
mutates the sample `.eir`/`.dae`/`.bin` files, feeds each to the tool that reads it, and runs every
program that assembles on both simulator engines, which must agree exactly.

Modules: `programs` (strategies for valid programs), `inputs` (input tensors for a program),
`mutate` (mutations of the sample files), `oracle` (running one case and judging it), `worker` (a
forked process per lane, so a hang or a crash is reported rather than fatal) and `campaign` (the
hypothesis loop, shrinking, the counts and the saved failures).  It sits at the top of the pipeline,
like ember.bench: nothing in Ember imports it.
"""
