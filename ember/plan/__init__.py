"""ember-plan: choose a representation per embedding table under a memory budget.

For every `emb.bag` table over a float32 param the planner measures each candidate form (the float table, and
what the lossy table transforms make of it: quantize-tables, tt-decompose, robe) by running the transform on a
program holding that table's bags alone, compiling it at -O3 and simulating it timing-only.  It then picks one
candidate per table so that the total simulated cycles (or energy) are least with the tables' bytes within the
budget, and reports the Pareto front of memory against cycles against reconstruction error.

    source.py      the input: a model or .eir (with its weights), or a bench workload (with its tables)
    tables.py      the tables to plan, and a table's bags as a program of their own with inputs to run
    candidates.py  the candidate transforms, applied to chosen tables, and each candidate measured
    choose.py      the optimal plan under a budget (exact), and the Pareto front of whole plans
    report.py      the text report, its JSON, and the plot
"""
