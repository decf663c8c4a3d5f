"""`advisor analyze` over several ranks, end to end on the session's Dask cluster
(`tests.conftest.session_scheduler`)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from advisor.cli import main
from advisor.job.rule import load_job_rules
from tests.conftest import session_scheduler, shared
from tests.job.conftest import STRAGGLER, WORLD

JOB_SCHEMA = Path(__file__).parents[2] / "advisor" / "report" / "job_schema.json"


def test_folder_of_ranks_json_and_html(synth_ranks, tmp_path, capsys):
    out, html = tmp_path / "job.json", tmp_path / "job.html"
    rc = main(["analyze", str(synth_ranks[0].parent), "--scheduler", session_scheduler(),
               "--json", str(out),
               "--html", str(html)])
    assert rc == 0
    d = json.loads(out.read_text())
    schema = json.loads(JOB_SCHEMA.read_text())
    jsonschema.validate(d, schema)
    assert d["job"]["ranks"] == WORLD and d["straggler"]["rank"] == STRAGGLER
    assert "straggler-rank" in [f["rule"] for f in d["findings"]]
    # per-rank rules ran on every rank (4 <= the sample size) and a shared finding is one row
    assert all(f["all_ranks"] for f in d["rank_findings"])
    page = html.read_text()
    assert 'class="straggler"' in page and "Exposed communication per rank and step" in page
    console = capsys.readouterr().out
    assert f"rank {STRAGGLER}" in console and "Job:" in console


def test_one_nsys_file_with_two_ranks_as_a_job(tmp_path):
    out = tmp_path / "job.json"
    rc = main(["analyze", "--job", str(shared("nsys-ai/mfu_2gpu_before.sqlite")),
               "--scheduler", session_scheduler(),
               "--rank-rules", "none", "--json", str(out), "-q"])
    assert rc == 0
    d = json.loads(out.read_text())
    jsonschema.validate(d, json.loads(JOB_SCHEMA.read_text()))
    assert [r["rank_source"] for r in d["ranks"]] == ["GPU order in the file"] * 2
    assert d["collectives"][0]["kind"] == "SendRecv" and d["collectives"][0]["waiting_ms"] > 0


def test_bad_rank_input_is_one_line_exit_2(tmp_path, capsys):
    (tmp_path / "rank0.json").write_text("not a trace")
    (tmp_path / "rank1.json").write_text("{}")
    rc = main(["analyze", str(tmp_path), "--scheduler", session_scheduler()])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and err[-1].startswith("advisor: error:") and "Traceback" not in "".join(err)
    assert main(["analyze", str(tmp_path / "nothing*.json")]) == 2


def test_job_rules_are_registered_and_documented():
    names = {r.name for r in load_job_rules()}
    assert names == {"exposed-communication", "straggler-rank", "load-imbalance"}


def test_job_output_over_a_rank_trace_is_refused(tmp_path, capsys):
    """A folder's or a glob's rank files are inputs: `--json` over one is refused, the trace kept."""
    import shutil

    src = shared("hta/nccl_parser_config/nccl_data.json.gz")
    for i in range(2):
        shutil.copy(src, tmp_path / f"rank{i}.json.gz")
    before = (tmp_path / "rank1.json.gz").read_bytes()
    for arg in (str(tmp_path), str(tmp_path / "rank*.json.gz")):
        rc = main(["analyze", arg, "--workers", "1", "-q", "--json", str(tmp_path / "rank1.json.gz")])
        assert rc == 2 and "is an input" in capsys.readouterr().err
        assert (tmp_path / "rank1.json.gz").read_bytes() == before
