"""The differential fuzzer (`ember-fuzz`, `make fuzz`): it generates `.dae` programs with hypothesis and
mutates the sample `.eir`/`.dae`/`.bin` files, feeds each to the tool that reads it, and runs every
program that assembles on both simulator engines, which must agree exactly.

Modules: `programs` (strategies for valid programs), `inputs` (input tensors for a program),
`mutate` (mutations of the sample files), `oracle` (running one case and judging it), `worker` (a
forked process per lane, so a hang or a crash is reported rather than fatal), `draws` (even draws) and
`campaign` (the hypothesis loop, shrinking, the counts and the saved failures).  Hostile use of the tools
(`hostile`) has a module per family: `special` (special files), `ranges` (settings at their limits),
`signals` (interrupts) and `pipes` (closed or short pipes), on `material` (a sample laid out as a user has
it), with `fifos` (the other end of a FIFO) and `scripts` (the console scripts as processes).  It sits at
the top of the pipeline, like ember.bench: nothing in Ember imports it.
"""
