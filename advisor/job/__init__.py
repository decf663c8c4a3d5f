"""A distributed job across its ranks: one trace per rank in, one cross-rank analysis out.

`inputs` finds the files and their ranks, `cluster` reduces each trace to a `summary` in a Dask
task, `model` aligns the ranks and finds who waits for whom, `rule` runs the job rules
(``rules/job/``, the rule contract at job scope), `report` builds the job's `Report` (the views
in `advisor.report` render it) and `workload` the job gate's input (`advisor.gate.job`). Only
`cluster` knows about Dask.
"""
