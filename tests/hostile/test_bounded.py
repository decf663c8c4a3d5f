"""Hostile input, second round (issue 30): bounded work, and internal errors as one line.

Each case is a real fixture trace, mutated in a temporary copy, run through the CLI. The cases
that once grew quadratically or ran for minutes run in a child process under an address-space
limit and a timeout: generous for a loaded 2-core CI machine, far below the blow-up each had
(measured before the fix, in the test's docstring).
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import re
import resource
import shutil
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from advisor.job.cluster import local_workers
from tests.hostile.conftest import KINETO, NSYS, ROOT, Run, assert_held, run_cli, snapshot

MEMORY_LIMIT = 1536 << 20  # address space of a child run: advisor needs about 0.5 GB of it
FP8_NSYS = ROOT / "fixtures" / "scenarios" / "fp8-candidate" / "bad" / "nsys.sqlite.gz"


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def run_bounded(args: list[object], timeout: float = 60, **kw) -> tuple[Run, float]:
    """``advisor ARGS`` in a child under `MEMORY_LIMIT`; the run and its wall time."""
    env = dict(kw.pop("env", os.environ))
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    options = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "preexec_fn": _limited,
               **kw}
    start = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "advisor.cli", *map(str, args)], text=True,
                       errors="replace", timeout=timeout, env=env, **options)
    return Run(p.returncode, p.stdout or "", p.stderr or ""), time.monotonic() - start


# ----- mutated copies of real traces ----------------------------------------------------------


def kineto_copy(tmp_path: Path, name: str, mutate, raw: dict[str, str] | None = None) -> Path:
    """The host-sync Kineto trace, ``mutate(events, doc)`` applied; ``raw`` replaces marker
    text in the written JSON (for escapes such as a lone ``\\ud800`` json.dumps cannot write)."""
    with gzip.open(KINETO, "rt") as f:
        doc = json.load(f)
    mutate(doc["traceEvents"], doc)
    text = json.dumps(doc)
    for marker, replacement in (raw or {}).items():
        text = text.replace(marker, replacement)
    out = tmp_path / name
    with gzip.open(out, "wt") as f:
        f.write(text)
    return out


def nsys_copy(tmp_path: Path, name: str, sql: str, source: Path = NSYS,
              collation: bool = False) -> Path:
    """A plain copy of a real nsys export with ``sql`` run on it."""
    out = tmp_path / name
    with gzip.open(source) as f, out.open("wb") as o:
        shutil.copyfileobj(f, o)
    conn = sqlite3.connect(out)
    if collation:
        conn.create_collation("writer_only", lambda a, b: (a > b) - (a < b))
    conn.executescript(sql)
    conn.commit()
    conn.close()
    return out


def _all_correlations(value: int):
    def mutate(events, _doc):
        for e in events:
            if isinstance(e.get("args"), dict) and "correlation" in e["args"]:
                e["args"]["correlation"] = value
    return mutate


# ----- 3. bounded work ------------------------------------------------------------------------


def test_one_kineto_correlation_id_is_linear(tmp_path):
    """Every correlation = 7 (1,600 calls, 1,400 GPU ops share it): 19.3 s and 930 MB before,
    each call linked to every op; now a note, and the first call keeps the id."""
    trace = kineto_copy(tmp_path, "corr7.json.gz", _all_correlations(7))
    out = tmp_path / "r.json"
    before = snapshot([trace])
    run, seconds = run_bounded(["analyze", trace, "--json", out])
    assert_held(run, before, [out], ok=(0,))
    assert seconds < 30
    notes = json.loads(out.read_text())["trace"]["notes"]
    assert any("reuse the correlation id" in n and "trace defect" in n for n in notes), notes
    assert "reuse the correlation id" in run.stdout


def test_one_nsys_correlation_id_is_linear(tmp_path):
    """One correlationId in every CUPTI table of a 630 kB export: 50 s and 2.2 GB before."""
    tables = ["CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_KERNEL",
              "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_MEMCPY",
              "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"]
    trace = nsys_copy(tmp_path, "corr7.sqlite",
                      "".join(f"UPDATE {t} SET correlationId = 7;" for t in tables))
    out = tmp_path / "r.json"
    run, seconds = run_bounded(["analyze", trace, "-q", "--json", out])
    assert_held(run, snapshot([trace]), [out], ok=(0,))
    assert seconds < 30
    assert any("reuse the correlation id" in n for n in json.loads(out.read_text())["trace"]["notes"])


def test_a_generated_string_column_is_refused_at_once(tmp_path):
    """StringIds.value computed as a 500 MB string per row (688 kB file): minutes and 2.9 GB
    before; SQLite computes such a column on every read, so it is refused. (The rows go in
    under a harmless expression, swapped for the hostile one in the schema afterwards:
    SQLite computes a virtual column on insert too.)"""
    trace = nsys_copy(tmp_path, "gen.sqlite", """
        ALTER TABLE StringIds RENAME TO S0;
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, base TEXT, value TEXT GENERATED ALWAYS
            AS (base) VIRTUAL);
        INSERT INTO StringIds (id, base) SELECT id, value FROM S0; DROP TABLE S0;
        PRAGMA writable_schema = ON;
        UPDATE sqlite_master SET sql = replace(sql, 'AS (base)',
            'AS (base || printf(''%.*c'', 500000000, ''x''))') WHERE name = 'StringIds';
        PRAGMA writable_schema = OFF;""")
    with contextlib.closing(sqlite3.connect(trace)) as conn:
        assert "500000000" in conn.execute(
            "SELECT sql FROM sqlite_master WHERE name = 'StringIds'").fetchone()[0]
    run, seconds = run_bounded(["analyze", trace, "-q"])
    assert_held(run, ok=(2,))
    assert "StringIds.value" in run.stderr and "generated column" in run.stderr
    assert seconds < 30


def test_sqlite_values_are_capped_in_the_query(tmp_path):
    """Kernel names of 300,000 characters stored in the export come back cut (16,384 + "…")."""
    trace = nsys_copy(tmp_path, "long.sqlite",
                      "UPDATE StringIds SET value = value || printf('%.*c', 300000, 'T') "
                      "WHERE id IN (SELECT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL);")
    out = tmp_path / "r.json"
    run, _ = run_bounded(["analyze", trace, "-q", "--json", out])
    assert_held(run, ok=(0,))
    text = out.read_text()
    assert re.search(r"T{10000,}(…|\\u2026)", text) and "T" * 16384 not in text


def test_a_value_over_the_sqlite_limit_is_one_line(tmp_path):
    """A stored value over 1 MiB (SQLITE_LIMIT_LENGTH on our connection) is refused by SQLite,
    and said in one line."""
    trace = nsys_copy(tmp_path, "big.sqlite",
                      "UPDATE StringIds SET value = printf('%.*c', 2000000, 'x') WHERE id = "
                      "(SELECT nameId FROM CUPTI_ACTIVITY_KIND_RUNTIME LIMIT 1);")
    run, _ = run_bounded(["analyze", trace, "-q"])
    assert_held(run, ok=(2,))
    assert "over 1 MiB" in run.stderr


def test_kineto_names_are_capped(tmp_path):
    def mutate(events, _doc):
        for e in events:
            if e.get("cat") == "kernel":
                e["name"] = "k" + "x" * 200_000
    trace = kineto_copy(tmp_path, "long.json.gz", mutate)
    out = tmp_path / "r.json"
    assert_held(run_cli(["analyze", trace, "-q", "--json", out]), ok=(0,))
    assert "x" * 16383 in out.read_text() and "x" * 16384 not in out.read_text()


def test_a_backtracking_step_pattern_runs_in_linear_time(tmp_path):
    """``(a+)+$`` against 5,000-character names ``aaa...a!``: over 100 s on Python's re."""
    def mutate(events, _doc):
        for e in events:
            if e.get("cat") == "cpu_op":
                e["name"] = "a" * 5000 + "!"
    trace = kineto_copy(tmp_path, "aaa.json.gz", mutate)
    run, seconds = run_bounded(["analyze", trace, "-q", "--steps", "(a+)+$"])
    assert_held(run)
    assert seconds < 30


@pytest.mark.parametrize("pattern", ["a{99999999999}", r"(a)\1", "(?<=x)step", "[", "a{1000}{1000}"])
def test_step_patterns_re2_cannot_run_are_one_line(pattern):
    run = run_cli(["analyze", KINETO, "-q", "--steps", pattern])
    assert_held(run, ok=(2,))
    assert "--steps" in run.stderr


def test_re2_keeps_the_usual_step_patterns():
    assert_held(run_cli(["analyze", KINETO, "-q", "--steps", r"^ProfilerStep#\d+$"]), ok=(0,))


@pytest.mark.parametrize("address", [
    "garbage", "http://127.0.0.1:8786", "ucx://127.0.0.1:8786", "inproc://x",
    "tls://127.0.0.1:8786", "ws://127.0.0.1:8786", "tcp://127.0.0.1:99999", "tcp://:8786",
    "127.0.0.1:8786; rm -rf /", "tcp://" + "a" * 300 + ":1"])
def test_scheduler_addresses_dask_cannot_use_are_one_line(tmp_path, address):
    run = run_cli(["analyze", KINETO, KINETO, "-q", "--scheduler", address])
    assert_held(run, ok=(2,))
    assert "not a Dask scheduler address" in run.stderr


class _Listener:
    """A TCP server that accepts connections and never says a word; or, with ``reply``,
    answers each connection with those bytes (an HTTP server, say)."""

    def __init__(self, reply: bytes | None = None) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.reply, self.conns = reply, []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            if self.reply is not None:
                conn.sendall(self.reply)

    def close(self) -> None:
        for c in self.conns:
            c.close()
        self.sock.close()


@pytest.mark.parametrize("reply", [None, b"HTTP/1.1 400 Bad Request\r\n\r\n" * 4])
def test_a_scheduler_that_never_answers_times_out(tmp_path, reply):
    """A listener that never speaks held the client over 300 s; an HTTP server's reply read
    as Dask frames asked for 3 EiB. Now Dask's connect timeout bounds the identity request."""
    listener = _Listener(reply)
    try:
        env = dict(os.environ, DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT="2s")
        run, seconds = run_bounded(["analyze", KINETO, KINETO, "-q", "--scheduler",
                                    f"tcp://127.0.0.1:{listener.port}"], timeout=90, env=env)
    finally:
        listener.close()
    assert_held(run, ok=(2,))
    assert "--scheduler" in run.stderr
    assert seconds < 60


def test_local_workers_are_bounded_by_cores_and_ranks():
    cores = len(os.sched_getaffinity(0))
    assert local_workers(64, 2) == min(2, cores)
    assert local_workers(None, 1000) == cores
    assert local_workers(1, 1000) == 1
    assert local_workers(10**30, 10**6) == cores


# ----- 5. internal errors as one line -----------------------------------------------------------


@pytest.mark.parametrize("where", ["pid", "process", "gpu", "thread"])
def test_a_lone_surrogate_escape_in_a_name(tmp_path, where):
    def mutate(events, doc):
        for e in events:
            if where == "pid" and e.get("pid") == 844:
                e["pid"] = "@SURR@"
            if where == "thread" and e.get("tid") == 844:
                e["tid"] = "@SURR@"
            if where == "process" and e.get("name") == "process_name" and e.get("pid") == 844:
                e["args"]["name"] = "py@SURR@"
        if where == "gpu":
            doc["deviceProperties"][0]["name"] = "H100@SURR@"
    trace = kineto_copy(tmp_path, f"{where}.json.gz", mutate, raw={"@SURR@": "\\ud800"})
    out, html = tmp_path / "r.json", tmp_path / "r.html"
    run, _ = run_bounded(["analyze", trace, "--json", out, "--html", html])
    assert_held(run, ok=(0,))
    json.loads(out.read_text(encoding="utf-8"))
    if where in ("process", "gpu"):
        assert "\ufffd" in run.stdout


def test_a_step_number_of_5000_digits(tmp_path):
    def mutate(events, _doc):
        for e in events:
            if str(e.get("name", "")).startswith("ProfilerStep#"):
                e["name"] = "ProfilerStep#" + "9" * 5000
    trace = kineto_copy(tmp_path, "digits.json.gz", mutate)
    assert_held(run_cli(["analyze", trace, "-q"]), ok=(0,))


@pytest.mark.parametrize("size", ["inf", "nan", "1e400", "-5G", "0"])
def test_max_unpacked_that_is_no_size(size):
    run = run_cli(["analyze", KINETO, "-q", "--max-unpacked", size])
    assert_held(run, ok=(2,))
    assert "--max-unpacked" in run.stderr


@pytest.mark.parametrize("case, sql", [
    ("without-rowid", """
        CREATE TABLE R2 (id INTEGER PRIMARY KEY, start INTEGER NOT NULL, end INTEGER NOT NULL,
            eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER,
            nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, callchainId INTEGER)
            WITHOUT ROWID;
        INSERT INTO R2 SELECT rowid, * FROM CUPTI_ACTIVITY_KIND_RUNTIME;
        DROP TABLE CUPTI_ACTIVITY_KIND_RUNTIME;
        ALTER TABLE R2 RENAME TO CUPTI_ACTIVITY_KIND_RUNTIME;"""),
    ("collation", """
        ALTER TABLE StringIds RENAME TO S0;
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT COLLATE writer_only);
        INSERT INTO StringIds SELECT id, value FROM S0; DROP TABLE S0;"""),
])
def test_sqlite_schemas_nsys_never_writes_are_one_line(tmp_path, case, sql):
    trace = nsys_copy(tmp_path, f"{case}.sqlite", sql, collation=True)
    before = snapshot([trace])
    run = run_cli(["analyze", trace, "-q"])
    assert_held(run, before, ok=(2,))
    assert "not an export nsys wrote" in run.stderr or "not a file nsys wrote" in run.stderr


def test_a_text_column_named_rowid_does_not_hide_the_row_ids(tmp_path):
    trace = nsys_copy(tmp_path, "rowid.sqlite", """
        ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL ADD COLUMN rowid TEXT;
        UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET rowid = 'x';
        ALTER TABLE NVTX_EVENTS ADD COLUMN rowid TEXT;
        UPDATE NVTX_EVENTS SET rowid = 'y';""")
    out = tmp_path / "r.json"
    assert_held(run_cli(["analyze", trace, "-q", "--json", out]), ok=(0,))
    assert '"gpu:x' not in out.read_text()


def test_kernels_ending_at_int64_max(tmp_path):
    """50 kernels whose end is 2**63 - 1 collapse every later step to no time: a
    ZeroDivisionError in fp8-candidate before; now the trace is summarised whole."""
    trace = nsys_copy(tmp_path, "int64.sqlite",
                      "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = 9223372036854775807 WHERE rowid "
                      "IN (SELECT rowid FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 50);",
                      source=FP8_NSYS)
    out = tmp_path / "r.json"
    assert_held(run_cli(["analyze", trace, "-q", "--json", out]), ok=(0,))


@pytest.mark.parametrize("args", [
    ["analyze", KINETO],
    ["analyze", KINETO, "-q", "--json", "-"],
    ["gate", KINETO, KINETO],
])
def test_standard_output_that_is_full(tmp_path, args):
    with open("/dev/full", "w") as full:
        run, _ = run_bounded(args, stdout=full, cwd=tmp_path)
    assert run.exit_code == 2, run.stderr[-2000:]
    assert run.stderr.splitlines() == ["advisor: error: cannot write the output (No space left "
                                       "on device)"]


def test_json_to_a_closed_standard_output():
    run, _ = run_bounded(["analyze", KINETO, "-q", "--json", "-"], **_closed_stdout())
    assert_held(run, ok=(2,))
    assert "standard output is closed" in run.stderr


def _closed_stdout() -> dict:
    """Run the child with descriptor 1 closed (the shell's ``>&-``)."""
    return {"preexec_fn": lambda: (_limited(), os.close(1))}


@pytest.mark.parametrize("spelling", ["newdir/", "newdir/."])
def test_an_output_spelled_as_a_directory(tmp_path, monkeypatch, spelling):
    monkeypatch.chdir(tmp_path)
    run = run_cli(["analyze", KINETO, "-q", "--json", spelling])
    assert_held(run, ok=(2,))
    assert "names a directory" in run.stderr
    assert list(tmp_path.iterdir()) == []
