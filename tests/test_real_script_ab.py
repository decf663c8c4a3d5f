"""`benchmarks/real_script_ab.py` reads iteration times from a real script's own log (nanoGPT's,
recorded on the H100 in fixtures/archive/public/logs) and tabulates the A/B: its parsing and its
arithmetic, checked against the log's own numbers. The run itself needs the script and, for the
figures that count, the H100 (benchmarks/public/overhead_ab.sh)."""

from __future__ import annotations

import gzip
import re
import statistics

import pytest

from benchmarks.real_script_ab import (
    NANOGPT,
    Run,
    Stamped,
    command,
    concurrent_rounds,
    main,
    parse_times,
    report,
    shared_interval,
)
from tests.conftest import ROOT

LOG = ROOT / "fixtures" / "archive" / "public" / "logs" / "nanogpt_eager.log.gz"


def log_text() -> str:
    with gzip.open(LOG, "rt") as f:
        return f.read()


def test_nanogpt_iterations_after_the_window_are_parsed_from_its_log():
    text = log_text()
    every = parse_times(text, re.compile(NANOGPT), 0)
    later = parse_times(text, re.compile(NANOGPT), 10)
    lines = [line for line in text.splitlines() if line.startswith("iter ")]
    assert len(every) == len(lines) and every[0] == pytest.approx(2034.78)
    assert later == every[10:]


def test_the_table_compares_each_variant_with_the_plain_runs_of_its_rounds():
    times = parse_times(log_text(), re.compile(NANOGPT), 5)
    plain = [Run("plain", k, times, 1.0, 0) for k in range(3)]
    slower = [Run("window", k, [t * 1.18 for t in times], 1.0, 0) for k in range(3)]
    table = report(plain + slower, ["window"])
    mean = statistics.fmean(times)
    assert f"| plain | {mean:.3f} |" in table
    assert f"| advisor window | {mean * 1.18:.3f} |" in table and "+18.0%" in table


def test_a_variant_passes_its_environment_and_flags_to_advisor(tmp_path):
    cmd, env = command("v", "ADVISOR_ANALYSIS_AT_END=1 --then continue", ["train.py", "-x"],
                       tmp_path)
    assert env == {"ADVISOR_ANALYSIS_AT_END": "1"}
    assert cmd[-4:] == ["--then", "continue", "train.py", "-x"] and "profile" in cmd


def test_fewer_than_three_rounds_or_a_regex_without_its_groups_is_refused(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--pairs", "2", "--", "train.py"])
    assert e.value.code == 2 and "at least 3" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["--regex", r"time (\d+)", "--", "train.py"])
    assert e.value.code == 2 and "named groups" in capsys.readouterr().err


def test_a_concurrent_pair_is_cut_to_the_seconds_both_runs_share():
    """Iterations before ``from_iter`` and outside the interval where both were past it and still
    running are left out of both means."""
    x = Stamped("plain", "0-3", [(float(t), t, 10.0 + t) for t in range(0, 20)], 0)
    y = Stamped("hooks", "4-7", [(float(t), t - 5, 20.0 + t) for t in range(5, 30)], 0)
    tx, ty = shared_interval(x, y, from_iter=3)
    # x is past iteration 3 from t=3 to t=19; y from t=8 (its iteration 3) to t=29
    assert tx == [10.0 + t for t in range(8, 20)]
    assert ty == [20.0 + t for t in range(8, 20)]
    assert shared_interval(x, Stamped("hooks", "4-7", [], 1), 3) == ([], [])


FAKE_TRAIN = """
import time
for i in range(int(__import__("sys").argv[1])):
    t = time.perf_counter()
    s = sum(range(3000))
    time.sleep(0.002)  # the run lasts over 1 s, so the pair's processes overlap past their start-up
    print(f"iter {i}: loss {s % 7}.0, time {(time.perf_counter() - t) * 1e3:.3f}ms, mfu 0%", flush=True)
"""


def test_concurrent_rounds_time_two_pinned_runs_side_by_side(tmp_path, capsys):
    """Plain beside plain on two single-core sets (a real pair of processes, the floor row): every
    round parsed, the table printed. The core sets are the first and last cores this process may
    use, so it runs on the 2-core CI machine."""
    import os

    script = tmp_path / "train.py"
    script.write_text(FAKE_TRAIN)
    cores = sorted(os.sched_getaffinity(0))
    assert len(cores) >= 2
    table = concurrent_rounds({}, 2, ({cores[0]}, {cores[-1]}), [str(script), "600"],
                              re.compile(NANOGPT), 20, None, 120.0)
    out = capsys.readouterr().out
    assert out.count("plain beside plain") == 2 and "no shared iterations" not in out
    assert f"plain@{cores[0]}-{cores[0]}" in out and f"plain@{cores[-1]}-{cores[-1]}" in out
    row = next(line for line in table.splitlines() if line.startswith("| plain (the floor) | 2 |"))
    assert row.count("%") == 4  # mean, median, min..max
