"""The job path's slim reader (`summary_graph`): the graph from the events it keeps holds what a
rank summary reads of the whole trace's, and the summary from it equals the whole trace's."""

from __future__ import annotations

import dataclasses
import gzip
from pathlib import Path

import pytest

from advisor.engine.rank_summary import summarize_graph
from advisor.errors import InputError
from advisor.ingest.base import LoadOptions, load_trace
from advisor.ingest.slim_trace import SummaryEvents, summary_graph
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


def _plain(summaries) -> list[dict]:
    return [dataclasses.asdict(s) for s in summaries]


def _rows(items) -> list[tuple]:
    """Each item's fields but its id: ids number the events read, which the cut renumbers."""
    return [tuple(getattr(x, f.name) for f in dataclasses.fields(x) if f.name != "id")
            for x in items]


def _events(graph) -> int:
    """The events of the document the graph was read from (every event, kept or not)."""
    return graph.info.totals["events"]


def _holds_what_a_summary_reads(slim, whole, wanted: SummaryEvents | None = None) -> None:
    """``slim`` (`summary_graph`'s) is ``whole`` (the whole trace's) restricted to what a rank
    summary reads: every GPU op, wait and step alike, and of the host calls and ranges a part,
    each as the whole trace has it, holding every one ``wanted`` (default: `SummaryEvents()`)
    keeps."""
    wanted = wanted or SummaryEvents()
    assert _rows(slim.gpu_ops) == _rows(whole.gpu_ops) and slim.gpu_ops
    assert _rows(slim.syncs) == _rows(whole.syncs)
    assert slim.steps == whole.steps and slim.step_source == whole.step_source
    assert slim.info.gpus == whole.info.gpus and slim.info.threads == whole.info.threads
    calls, ranges = set(_rows(slim.api_calls)), set(_rows(slim.ranges))
    assert calls < set(_rows(whole.api_calls)) and ranges < set(_rows(whole.ranges))
    assert {row for c, row in zip(whole.api_calls, _rows(whole.api_calls))
            if wanted.keeps_call(c.name)} <= calls
    assert {row for r, row in zip(whole.ranges, _rows(whole.ranges))
            if wanted.keeps_range(r.name)} <= ranges


def _same_events(a, b) -> None:
    """``a`` and ``b`` were read from the same events: equal to the ids and the counts."""
    assert a.info.totals == b.info.totals
    assert a.gpu_ops == b.gpu_ops and a.api_calls == b.api_calls and a.ranges == b.ranges
    assert a.syncs == b.syncs and a.steps == b.steps


@pytest.mark.parametrize("name", REAL_KINETO + FIXTURES)
def test_slim_summary_equals_the_whole_traces(name):
    path = _trace(name)
    options = LoadOptions()
    whole_graph = load_trace(path, options)
    whole = summarize_graph(whole_graph)
    slim = summary_graph(path, options)
    assert _events(slim) < _events(whole_graph) / 2  # it leaves out most of the trace
    _holds_what_a_summary_reads(slim, whole_graph)
    assert _plain(summarize_graph(slim)) == _plain(whole)
    assert _plain(summarize_file(str(path), 0, options)) == _plain(whole)
    assert any(s.steps for s in whole)


def test_steps_option_reaches_the_slim_reader():
    """--steps naming other ranges: the slim reader keeps those ranges, so the steps found are
    the ones the whole trace gives with the same option."""
    path = shared("hta/nccl_parser_config/nccl_data.json.gz")
    options = LoadOptions(step_pattern=r"^DistributedDataParallel\.forward$")
    whole_graph = load_trace(path, options)
    whole = summarize_graph(whole_graph)
    _holds_what_a_summary_reads(summary_graph(path, options), whole_graph,
                                SummaryEvents(options.step_pattern))
    default = summarize_file(str(path), 0, LoadOptions())
    mine = summarize_file(str(path), 0, options)
    assert _plain(mine) == _plain(whole)
    assert [s.host_ns for s in mine[0].steps] != [s.host_ns for s in default[0].steps]


def test_traces_it_does_not_take_are_read_whole(tmp_path):
    # no step ranges: steps come from the launch pattern, which reads every host range
    alexnet = shared("hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz")
    _same_events(summary_graph(alexnet, LoadOptions()), load_trace(alexnet, LoadOptions()))
    nsys = shared("nsys-ai/mfu_2gpu_before.sqlite")  # not JSON: its own loader selects the events
    _same_events(summary_graph(nsys, LoadOptions()), _nsys_for_summary(nsys))
    bad = tmp_path / "rank0.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "cat": "kernel", "args": 7}]')  # truncated
    with pytest.raises(InputError) as ordinary:
        load_trace(bad, LoadOptions())
    with pytest.raises(InputError) as caught:  # ... and the ordinary loader says what is wrong
        summary_graph(bad, LoadOptions())
    assert str(caught.value) == str(ordinary.value)
    with pytest.raises(InputError):
        summarize_file(str(bad), 0, LoadOptions())


def test_unpack_cap_applies_to_the_slim_reader():
    path = shared("hta/nccl_parser_config/nccl_data.json.gz")
    with pytest.raises(InputError, match="unpack"):
        summarize_file(str(path), 0, LoadOptions(max_unpacked_bytes=1 << 20))


def _nsys_for_summary(path: Path):
    """An nsys export as the job path reads it: by its loader, a summary's events selected."""
    return load_trace(path, LoadOptions(events=SummaryEvents()))


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
    path = ROOT / REAL_NSYS[0]
    _same_events(summary_graph(path, LoadOptions()), _nsys_for_summary(path))


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
