"""`advisor gate`: decide whether a candidate run may replace a baseline run of the same step.

Both runs become a `GateInput` (`inputs`), whether they were traces or saved
``advisor analyze --json`` results (whose gate keys `metrics` computes), so one comparison serves
both. `workload` refuses pairs that cannot be compared; `stats` and `timing` test the step-time
distributions against their own noise; `noise` recognises a slower host; `findings` and
`signals` find anti-patterns the candidate introduced; `attribution` says where the time moved;
`compare` makes the decision (`GateResult`); `render/` (`text`, `markdown`, `junit`, `github`,
`result_json`) renders it and `outputs` writes the files.

This package imports nothing at package level, so importing one module of it stays cheap.
"""
