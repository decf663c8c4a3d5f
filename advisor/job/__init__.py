"""A distributed job across its ranks: one trace per rank in, one cross-rank analysis out.

`inputs` finds the files and their ranks, `cluster` reduces each trace to a `summary` in a Dask
task, `model` aligns the ranks and finds who waits for whom, `rule` runs the job rules
(``rules/job/``), and `report` renders it. Only `cluster` knows about Dask.
"""
