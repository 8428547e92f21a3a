"""The DRAM model checked against an outside one (Ramulator 2), as the core is checked against llvm-mca.

`traces` makes the request streams, `check` runs Ember's DRAM model on them under the same closed loop the
outside simulator's trace front end uses, and `reference.json` keeps the outside results
(tools/dram_reference.py regenerates them from a Ramulator 2 you build yourself).
"""
