"""A distributed job across its ranks: one trace per rank in, one cross-rank analysis out.

This package holds only what is a job's own: `inputs` finds the files and their ranks,
`cluster` maps each trace to its rank summary in a Dask task (only `cluster` and `scheduler`
know about Dask), `api` reduces the summaries to the job and runs the job rules, and `rule` is
the rule contract at job scope with the job rule set's runner. Everything else sits on the floor
a single trace uses: the collectives and a rank's workload signature beside the graph
(`advisor.graph.collectives`, `advisor.graph.rank_workload`), the slim reader in ingest
(`advisor.ingest.slim_trace`), the rank summary, the cross-rank model and the job what-if in the
engine (`advisor.engine.rank_summary`, `job_model`, `job_whatif`), the job's `Report` in
`advisor.report.job_report` and the job gate's input in `advisor.gate.job`.
"""
