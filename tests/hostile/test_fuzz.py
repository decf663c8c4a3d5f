"""Fuzzing every ingester and the gate's inputs with mutated real fixture traces (hypothesis).

Each case takes a real capture from fixtures/scenarios and damages it the way files get damaged
or forged: truncation, corrupted SQLite pages, wrong column types, missing tables, wrong JSON
types, deep nesting, huge strings. Whatever the damage, advisor must end in a result or in one
line ``advisor: error: ...`` with exit 2: never a traceback, a hang, a changed input or a file
written beside it (`conftest.assert_held`).

Reproducible within a fixed CI budget: the seeds are fixed (``@seed``, no example database), so
CI runs the same cases every time and a failure names the exact mutation; each test runs
``EXAMPLES`` cases, each under a ``CASE_SECONDS`` alarm (a hang fails the case instead of
stalling CI). Raise ``ADVISOR_FUZZ_EXAMPLES`` locally to search further.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import shutil
import signal
import sqlite3
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from tests.hostile.conftest import FIXTURES, assert_held, run_cli, snapshot

KINETO = FIXTURES / "fp32-matmul" / "bad" / "trace.json.gz"  # the smallest real captures
NSYS = FIXTURES / "fp32-matmul" / "bad" / "nsys.sqlite.gz"
EXAMPLES = int(os.environ.get("ADVISOR_FUZZ_EXAMPLES", "25"))
CASE_SECONDS = 60

FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=False,
                suppress_health_check=list(HealthCheck), print_blob=True)


class Hang(Exception):
    pass


@contextlib.contextmanager
def alarm(seconds: int):
    def fire(signum, frame):
        raise Hang(f"no answer within {seconds} s")

    previous = signal.signal(signal.SIGALRM, fire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def case_dir():
    with tempfile.TemporaryDirectory(prefix="advisor-fuzz-") as tmp:
        yield Path(tmp)


# ----- values of every JSON type, the hostile ones included --------------------------------------

HUGE = 3 << 20  # a 3 MiB string: past every name cap, cheap enough for many cases

json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(min_value=10**30, max_value=10**60),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20),
    st.sampled_from(["1e306", "-1", "NaN", "[/]", "\x1b[2J", "\n::error::x"]),
)
WRONG_TYPES = [None, True, False, 0, -1, 7, 1.5, -2.5e300, 10**50, "", "x", "12", "1e306",
               "[/]", [], [1, 2], ["a"], [[1, 2], [3]], {}, {"a": 1}, {"name": {"x": 1}}]
"""One value of every JSON type, including the ones a field never holds: drawn uniformly, so
a short run still puts each type in each field (hypothesis' own values favour the simplest)."""
json_values = st.recursive(json_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=8)


@st.composite
def nested(draw) -> str:
    """JSON text nested deeper than any parser's recursion (as text: json.dumps would recurse)."""
    depth = draw(st.sampled_from([2_000, 100_000]))
    return "[" * depth + "]" * depth


@st.composite
def hostile(draw) -> tuple[str, object]:
    """("json", value) to put in the document, or ("text", raw JSON text) for what json.dumps
    cannot make (deep nesting, literal huge numbers, a huge string)."""
    kind = draw(st.sampled_from(["typed", "typed", "typed", "value", "nested", "number", "huge"]))
    if kind == "typed":
        return "json", draw(st.sampled_from(WRONG_TYPES))
    if kind == "value":
        return "json", draw(json_values)
    if kind == "nested":
        return "text", draw(nested())
    if kind == "number":
        return "text", draw(st.sampled_from(["9" * 5000, "1e999990", "-1e400", "1" + "0" * 400]))
    return "json", "x" * draw(st.sampled_from([70_000, HUGE]))


def place(doc: object, steps: list[int], key: str, value: tuple[str, object]) -> str:
    """The document as JSON text with ``value`` set at a path chosen by ``steps``."""
    node = doc
    for step in steps:
        children = (list(node.values()) if isinstance(node, dict) else node
                    if isinstance(node, list) else [])
        children = [c for c in children if isinstance(c, (dict, list))]
        if not children:
            break
        node = children[step % len(children)]
    marker = "@@FUZZ@@"
    if isinstance(node, dict):
        target = key if key in node or not node else sorted(node)[hash(key) % len(node)]
        node[target] = marker
    elif isinstance(node, list) and node:
        node[steps[-1] % len(node) if steps else 0] = marker
    else:
        return json.dumps(doc)
    kind, raw = value
    text = json.dumps(raw) if kind == "json" else raw
    return json.dumps(doc).replace(json.dumps(marker), text, 1)


def check(args: list, inputs: list[Path], outputs: list[Path] = (), ok=(0, 2)) -> None:
    before = snapshot(inputs)
    with alarm(CASE_SECONDS):
        run = run_cli(args)
    assert_held(run, before, outputs=outputs, ok=ok)


# ----- torch.profiler (Kineto) traces --------------------------------------------------------------


def kineto_doc() -> dict:
    with gzip.open(KINETO, "rt") as f:
        return json.load(f)


_KINETO = kineto_doc()
FIELDS = ["ts", "dur", "args", "args", "name", "pid", "tid", "cat", "ph", "correlation",
          "device", "grid", "block", "bytes", "Input Dims", "stream", "labels",
          "deviceProperties", "traceEvents"]


CATEGORIES = [*sorted({e.get("cat") for e in _KINETO["traceEvents"]
                       if e.get("ph") == "X" and isinstance(e.get("cat"), str)}), "metadata"]
ARG_FIELDS = ("correlation", "device", "grid", "block", "bytes", "Input Dims", "stream", "name",
              "labels")


@seed(2110)
@FUZZ
@given(how=st.sampled_from(["field", "field", "field", "event", "truncate", "top"]),
       steps=st.lists(st.integers(0, 10**6), min_size=1, max_size=5),
       cat=st.sampled_from(CATEGORIES), many=st.integers(1, 50),
       key=st.sampled_from(FIELDS), value=hostile(), cut=st.floats(0, 1), gz=st.booleans())
def test_kineto_trace_mutations(how, steps, cat, many, key, value, cut, gz):
    doc = json.loads(json.dumps(_KINETO))
    if how == "field":  # a field of events of one category (or of their args) made hostile
        events = [e for e in doc["traceEvents"]
                  if (e.get("ph") == "M" if cat == "metadata" else e.get("cat") == cat)]
        start = steps[0] % len(events)
        kind, raw = value
        text = json.dumps(raw) if kind == "json" else raw
        if kind == "text" or len(text) > 100_000:
            many = 1  # one deep or huge value is the case; fifty would only be slower
        for event in events[start:start + many]:
            target = event.get("args") if key in ARG_FIELDS else event
            target = target if isinstance(target, dict) else event
            target[key] = "@@FUZZ@@"
        text = json.dumps(doc).replace('"@@FUZZ@@"', text)
    elif how == "event":  # a whole event replaced
        text = place(doc, [0, steps[0]], key, value)
    elif how == "top":  # a top-level key of the document
        text = place(doc, [], key, value)
    else:
        text = json.dumps(doc)
        text = text[: int(len(text) * cut)]
    data = text.encode()
    with case_dir() as d:
        trace = d / ("trace.json.gz" if gz else "trace.json")
        trace.write_bytes(gzip.compress(data, 1) if gz else data)
        check(["analyze", trace, "--json", d / "out.json"], [trace], [d / "out.json"])


# ----- Nsight Systems SQLite exports ---------------------------------------------------------------

TABLES = ["CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS", "StringIds",
          "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
          "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "TARGET_INFO_GPU", "META_DATA_EXPORT",
          "ENUM_NSYS_EVENT_TYPE", "PROCESSES", "ThreadNames", "TARGET_INFO_CUDA_DEVICE"]
sql_values = st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1), st.floats(allow_nan=False),
                       st.text(max_size=12), st.binary(max_size=8),
                       st.sampled_from(["x" * 70_000, "[/]\x1b[2J", "\n::error::x"]))


def _unpacked(dst: Path) -> Path:
    with gzip.open(NSYS, "rb") as src, dst.open("wb") as out:
        shutil.copyfileobj(src, out)
    return dst


def _columns(db: Path, table: str) -> list[str]:
    with sqlite3.connect(db) as c:
        return [r[1] for r in c.execute(f"PRAGMA table_info({table})")]


@seed(2111)
@FUZZ
@given(how=st.sampled_from(["column", "column", "drop", "pages", "truncate"]),
       table=st.sampled_from(TABLES), column=st.integers(0, 100), value=sql_values,
       modulus=st.integers(1, 50), offsets=st.lists(st.floats(0, 1), min_size=1, max_size=8),
       noise=st.binary(min_size=1, max_size=64), gz=st.booleans())
def test_nsys_export_mutations(how, table, column, value, modulus, offsets, noise, gz):
    with case_dir() as d:
        db = _unpacked(d / "work.sqlite")
        with sqlite3.connect(db) as c:
            present = {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if how in ("column", "drop") and table not in present:
            how = "pages"
        if how == "column":  # wrong types (constraints dropped, as a foreign writer may)
            cols = _columns(db, table)
            col = cols[column % len(cols)]
            with sqlite3.connect(db) as c:
                c.execute(f"CREATE TABLE loose AS SELECT * FROM {table}")
                c.execute(f"DROP TABLE {table}")
                c.execute(f"ALTER TABLE loose RENAME TO {table}")
                c.execute(f'UPDATE {table} SET "{col}" = ? WHERE rowid % ? = 0', (value, modulus))
        elif how == "drop":  # a missing table
            with sqlite3.connect(db) as c:
                c.execute(f"DROP TABLE {table}")
        raw = bytearray(db.read_bytes())
        if how == "pages":  # corrupted pages: bytes overwritten at places through the file
            for o in offsets:
                at = int(o * (len(raw) - len(noise)))
                raw[at:at + len(noise)] = noise
        elif how == "truncate":
            raw = raw[: int(offsets[0] * len(raw))]
        trace = d / ("run.sqlite.gz" if gz else "run.sqlite")
        trace.write_bytes(gzip.compress(bytes(raw), 1) if gz else bytes(raw))
        db.unlink()
        check(["analyze", trace, "--json", d / "out.json"], [trace], [d / "out.json"])


# ----- `advisor gate` inputs ------------------------------------------------------------------------


def _saved_result() -> dict:
    from advisor.analysis import analyze
    from advisor.report.json_report import to_dict

    return json.loads(json.dumps(to_dict(analyze(NSYS))))


_RESULT: dict | None = None


def saved_result() -> dict:
    global _RESULT
    if _RESULT is None:
        _RESULT = _saved_result()
    return json.loads(json.dumps(_RESULT))


GATE_KEYS = ["steps", "trace", "kernels", "findings", "gpus", "notes", "warmup", "name",
             "steady_times_ms", "gpu_busy_times_ms", "counts_per_step", "shapes", "all",
             "schema_version", "ops_per_step", "below_threshold", "skipped"]


@seed(2112)
@FUZZ
@given(how=st.sampled_from(["value", "value", "value", "truncate"]),
       steps=st.lists(st.integers(0, 10**6), max_size=5), key=st.sampled_from(GATE_KEYS),
       value=hostile(), cut=st.floats(0, 1), gz=st.booleans(), side=st.booleans())
def test_gate_input_mutations(how, steps, key, value, cut, gz, side):
    doc = saved_result()
    with case_dir() as d:
        good = d / "baseline.json"
        good.write_text(json.dumps(doc))
        text = place(doc, steps, key, value) if how == "value" else json.dumps(doc)
        if how == "truncate":
            text = text[: int(len(text) * cut)]
        bad = d / ("candidate.json.gz" if gz else "candidate.json")
        bad.write_bytes(gzip.compress(text.encode(), 1) if gz else text.encode())
        outs = [d / "v.md", d / "v.xml", d / "v.json"]
        pair = [good, bad] if side else [bad, good]
        check(["gate", *pair, "--markdown", outs[0], "--junit", outs[1], "--json", outs[2],
               "--github-annotations"], [good, bad], outs, ok=(0, 1, 2))
        verdict = json.loads(outs[2].read_text())
        assert verdict["status"] in ("pass", "fail", "inconclusive")
