"""`benchmarks/real_script_ab.py` reads iteration times from a real script's own log (nanoGPT's,
recorded on the H100 in fixtures/archive/public/logs) and tabulates the A/B: its parsing and its
arithmetic, checked against the log's own numbers. The run itself needs the script and, for the
figures that count, the H100 (benchmarks/public/overhead_ab.sh)."""

from __future__ import annotations

import gzip
import re
import statistics

import pytest

from benchmarks.real_script_ab import NANOGPT, Run, command, main, parse_times, report
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
