"""`advisor gate`: decide whether a candidate run may replace a baseline run of the same step.

Both runs become a `GateInput` (`inputs`), whether they were traces or saved
``advisor analyze --json`` results, so one comparison serves both. `workload` refuses pairs that
cannot be compared; `stats` tests the step-time distributions against their own noise;
`findings` and `signals` find anti-patterns the candidate introduced; `attribution` says where the
time moved; `compare` makes the decision (`GateResult`); `text`, `markdown`, `junit`, `github`
and `result_json` render it.

This package deliberately imports nothing at package level: `advisor.report.json_report` imports
`advisor.gate.metrics`, and the JSON report must not pull the whole gate in.
"""
