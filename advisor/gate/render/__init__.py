"""The gate's verdict as each reader wants it: the console text, a Markdown PR comment, JUnit XML,
GitHub workflow annotations and the machine JSON. Each renders a `advisor.gate.compare.GateResult`
and decides nothing; `advisor.gate.outputs` writes the files asked for."""
