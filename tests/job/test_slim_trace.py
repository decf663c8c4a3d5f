"""The job path's slim reader: the summary from the events it keeps equals the whole trace's."""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path

import pytest

from advisor.engine.rank_summary import summarize_graph
from advisor.errors import InputError
from advisor.ingest.base import LoadOptions, load_trace
from advisor.ingest.slim_trace import SummaryEvents, slim_copy
from advisor.job.cluster import summarize_file
from tests.conftest import ROOT, shared

REAL_KINETO = [
    "hta/nccl_parser_config/nccl_data.json.gz",  # DDP, NCCL < 2.19 kernel names
    "hta/negative_queue_length_values_check/rank0.json.gz",  # rank 0 of HTA's 16-rank example
]
FIXTURES = [
    "fixtures/public/nanogpt/trace.json.gz",
    "fixtures/scenarios/host-sync/bad/trace.json.gz",  # host waits on the GPU
    "fixtures/scenarios/loader-jitter/bad/trace.json.gz",  # a data phase
]


def _trace(name: str) -> Path:
    return ROOT / name if name.startswith("fixtures/") else shared(name)


def _events(path: Path) -> int:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return len(json.load(f)["traceEvents"])


def _plain(summaries) -> list[dict]:
    return [dataclasses.asdict(s) for s in summaries]


@pytest.mark.parametrize("name", REAL_KINETO + FIXTURES)
def test_slim_summary_equals_the_whole_traces(name):
    path = _trace(name)
    options = LoadOptions()
    whole = summarize_graph(load_trace(path, options))
    with slim_copy(path, options) as slim:
        assert slim is not None
        assert _events(slim) < _events(path) / 2  # it leaves out most of the trace
    assert _plain(summarize_file(str(path), 0, options)) == _plain(whole)
    assert any(s.steps for s in whole)


def test_steps_option_reaches_the_slim_reader():
    """--steps naming other ranges: the slim reader keeps those ranges, so the steps found are
    the ones the whole trace gives with the same option."""
    path = shared("hta/nccl_parser_config/nccl_data.json.gz")
    options = LoadOptions(step_pattern=r"^DistributedDataParallel\.forward$")
    whole = summarize_graph(load_trace(path, options))
    default = summarize_file(str(path), 0, LoadOptions())
    mine = summarize_file(str(path), 0, options)
    assert _plain(mine) == _plain(whole)
    assert [s.host_ns for s in mine[0].steps] != [s.host_ns for s in default[0].steps]


def test_traces_it_does_not_take_are_read_whole(tmp_path):
    # no step ranges: steps come from the launch pattern, which reads every host range
    assert _no_slim(shared("hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz"))
    assert _no_slim(shared("nsys-ai/mfu_2gpu_before.sqlite"))  # not JSON
    bad = tmp_path / "rank0.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "cat": "kernel", "args": 7}]')  # truncated
    assert _no_slim(bad)
    with pytest.raises(InputError):  # ... and the ordinary loader says what is wrong
        summarize_file(str(bad), 0, LoadOptions())


def test_unpack_cap_applies_to_the_slim_reader():
    path = shared("hta/nccl_parser_config/nccl_data.json.gz")
    with pytest.raises(InputError, match="unpack"):
        summarize_file(str(path), 0, LoadOptions(max_unpacked_bytes=1 << 20))


def _no_slim(path: Path) -> bool:
    with slim_copy(path, LoadOptions()) as slim:
        return slim is None


# ----- nsys exports: the loader selects a summary's events in SQL (issue #39) -----------------

REAL_NSYS = [
    "fixtures/jobs/h200x2-ddp/nsys/slow-rank.sqlite.gz",  # 2-GPU DDP, both ranks in one file
    "fixtures/scenarios/host-sync/bad/nsys.sqlite.gz",  # host waits on the GPU
    "fixtures/scenarios/loader-jitter/bad/nsys.sqlite.gz",  # a data phase
    "nsys-ai/mfu_2gpu_before.sqlite",  # two ranks, another nsys version
    "nsys-ai/h100_2gpu_1s.sqlite",  # calls out of start order in the export
]


@pytest.mark.parametrize("name", REAL_NSYS)
def test_an_nsys_export_read_for_the_summary_gives_the_whole_ones(name):
    path = _trace(name)
    options = LoadOptions()
    whole_graph = load_trace(path, options)
    whole = summarize_graph(whole_graph)
    kept = load_trace(path, dataclasses.replace(options, events=SummaryEvents()))
    assert _plain(summarize_file(str(path), 0, options)) == _plain(whole)
    if whole_graph.steps and whole_graph.step_source.value != "launch pattern":
        # named steps: only a summary's calls and ranges were read, every GPU op still was
        assert len(kept.api_calls) < len(whole_graph.api_calls)
        assert len(kept.gpu_ops) == len(whole_graph.gpu_ops)
        assert {c.name for c in kept.api_calls} < {c.name for c in whole_graph.api_calls}


def test_an_nsys_export_with_inferred_steps_is_read_whole():
    """Steps from the launch pattern compare every host range of each repeat: the filter is
    not applied, so nothing the inference reads is missing."""
    path = shared("nsys-ai/mock.sqlite")
    whole = load_trace(path, LoadOptions())
    kept = load_trace(path, LoadOptions(events=SummaryEvents()))
    if whole.steps and whole.step_source.value == "launch pattern":
        assert len(kept.api_calls) == len(whole.api_calls)
        assert len(kept.ranges) == len(whole.ranges)
    assert _plain(summarize_graph(kept)) == _plain(summarize_graph(whole))


def test_the_job_reader_does_not_unpack_an_nsys_export_as_json(monkeypatch):
    """An nsys export is told by its first bytes; the JSON reader never decompresses it whole."""
    import advisor.ingest.slim_trace as st

    def refuse(*_a, **_k):
        raise AssertionError("decompressed as JSON")

    monkeypatch.setattr(st, "CappedReader", refuse)
    assert _no_slim(ROOT / REAL_NSYS[0])


# ----- the job path decodes a torch.profiler rank once (issue #39) ----------------------------


def _rewritten(src: Path, dest: Path, old: bytes, new: bytes) -> Path:
    """``src`` with its first ``old`` replaced by ``new``, gzipped at ``dest``."""
    text = gzip.decompress(src.read_bytes())
    assert old in text
    dest.write_bytes(gzip.compress(text.replace(old, new, 1), compresslevel=1))
    return dest


@pytest.mark.parametrize("name", ["hta/nccl_parser_config/nccl_data.json.gz",
                                  "fixtures/scenarios/host-sync/bad/trace.json.gz"])
def test_the_decoded_route_and_the_stream_give_one_summary(name, monkeypatch):
    """The events decoded in memory (the usual route) and the kept events re-read through the
    streaming loader (kept text over `MAX_DECODED_BYTES`) summarise alike."""
    import advisor.ingest.slim_trace as st

    path = _trace(name)
    decoded = summarize_file(str(path), 0, LoadOptions())
    monkeypatch.setattr(st, "MAX_DECODED_BYTES", 0)
    assert _plain(summarize_file(str(path), 0, LoadOptions())) == _plain(decoded)


@pytest.mark.parametrize("old,new", [
    (b'"name": "process_name"', b'"name": "process_name", "big": ' + b"7" * 45),  # a long int
    (b'"name": "process_name"', b'"name": "process_name", "odd": NaN'),  # msgspec refuses it
])
def test_text_the_decoded_route_does_not_take_is_streamed(tmp_path, old, new):
    """An integer literal longer than the stream keeps as a number, or a NaN: the in-memory
    decode would differ from the stream's or refuse, so the stream reads it, as alone."""
    path = _rewritten(ROOT / "fixtures/scenarios/host-sync/bad/trace.json.gz",
                      tmp_path / "rank0.json.gz", old, new)
    whole = summarize_graph(load_trace(path, LoadOptions()))
    assert _plain(summarize_file(str(path), 0, LoadOptions())) == _plain(whole)
