"""One gate input from a trace or from a saved ``advisor analyze --json`` result.

A trace is analysed and turned into the JSON result (`advisor.report.json_report.to_dict`) before
it is read, so a trace and its saved result give the same `GateInput` to the same number: there is
one comparison, whichever way the runs arrive.

A saved result is the gate's input boundary and is checked there, once: read within size caps
(`advisor.ingest.input_file`), parsed without NaN/Infinity and with bounded numbers and nesting,
then validated against the shipped JSON schema (`advisor/report/schema.json`, the contract
`advisor analyze --json` writes), so a wrong type anywhere is exit 2 naming the field, never a
crash; step times must be positive finite numbers, or the gate would judge nothing.
"""

from __future__ import annotations

import json
import math
import re
import statistics
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.errors import InputError, TraceFormatError
from advisor.gate.tried import TriedRuns, read_tried
from advisor.ingest.base import LoadOptions
from advisor.ingest.input_file import GIB, CappedReader, UnpackLimits, check_regular, read_head
from advisor.report import signing

if TYPE_CHECKING:
    from advisor.config import RuleSettings

SUPPORTED_MAJOR = "1"
MAX_RESULT_BYTES = GIB  # a saved result is a few MB; a larger one is not ours


@dataclass(frozen=True)
class KernelRow:
    name: str
    category: str
    count_per_step: float
    ms_per_step: float
    shapes: Mapping[str, float] = field(default_factory=dict)  # launch geometry -> per step


@dataclass(frozen=True)
class FindingRow:
    rule: str
    code: str
    speedup: float
    saved_ms: float
    message: str
    reported: bool  # False: matched under the reporting threshold (the result's below_threshold)


@dataclass(frozen=True)
class GateInput:
    """What the gate knows about one run. Times in milliseconds, per steady-state step."""

    path: str
    kind: str  # "trace" or "json": how it arrived
    trace_format: str  # "nsys-sqlite" or "kineto-json": how it was captured
    gpus: tuple[str, ...]
    steps_source: str
    step_times_ms: tuple[float, ...]  # steady steps, in order
    gpu_busy_ms: tuple[float, ...] = ()  # same steps; empty when the result predates the gate
    counts: Mapping[str, float] = field(default_factory=dict)
    launch_interval_ms: Mapping[str, float] = field(default_factory=dict)
    phases_ms: Mapping[str, float] = field(default_factory=dict)
    idle_causes_ms: Mapping[str, float] = field(default_factory=dict)
    categories_ms: Mapping[str, float] = field(default_factory=dict)
    kernels: tuple[KernelRow, ...] = ()
    kernels_complete: bool = True  # False: only the report's top kernels were available
    findings: tuple[FindingRow, ...] = ()
    skipped: Mapping[str, str] = field(default_factory=dict)  # rule -> why it could not run
    notes: tuple[str, ...] = ()
    # Why these steps cannot carry a verdict (too few, no warm-up, shorter than one period of
    # the loop: `advisor.engine.step_basis`); None when they can.
    withheld: str | None = None
    steps_described: str = ""  # which process and steps, how found
    ops: Mapping[str, float] = field(default_factory=dict)  # host operator+shapes -> per step
    # The report's own step (``baseline_step_ms``: the steady steps' mean without the
    # profiler's host overhead, or `advisor profile`'s measured mean) over the mean of its steady
    # steps as traced; 1.0 for results without one. Kept as a ratio so that the step shown
    # follows the steps it comes from (`step_ms`).
    step_basis_ratio: float = 1.0
    # `advisor profile --try`'s plain runs and measured fixes (`advisor.gate.tried`); None when
    # the run is not a --try result
    tried: TriedRuns | None = None
    # Steady steps the trace holds (its steps less the warm-up); more than `step_times_ms` holds
    # when the analysis loaded a window of them (``--max-steps``); 0 when the result lacks it
    steps_held: int = 0
    # The process whose steps these are, how it was chosen ("most steps" or "--pid") and how
    # many processes with steps or GPU work the trace holds (0: unknown, a result without them)
    pid: int | None = None
    chosen_by: str = ""
    processes: int = 0

    @property
    def steps_judged(self) -> str:
        """"9 steady steps", or "30 of 69 steady steps" when only a window of them was judged."""
        n = len(self.step_times_ms)
        return f"{n} of {self.steps_held} steady steps" if self.steps_held > n else \
            f"{n} steady steps"

    @property
    def step_ms(self) -> float:
        """The step time this run's own report gives (`advisor analyze` and the job view show
        the same one), so one trace has one step time in every command (issue 32); the
        verdict's statistics still compare the steady steps' distributions."""
        if not self.step_times_ms:
            return 0.0
        return statistics.fmean(self.step_times_ms) * self.step_basis_ratio

    @property
    def median_ms(self) -> float:
        return float(statistics.median(self.step_times_ms)) if self.step_times_ms else 0.0

    @property
    def median_busy_ms(self) -> float | None:
        return float(statistics.median(self.gpu_busy_ms)) if self.gpu_busy_ms else None

    @property
    def name(self) -> str:
        return Path(self.path).name


def _finite(v: Any) -> bool:
    """A real number as JSON gives one: int or float, not a bool (True is an int), not NaN or
    infinite (Python's json reads both)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _amount(v: Any, path: str, where: str) -> float:
    """A per-step amount (a time, a count, bytes): a finite number, not negative. Anything else
    is refused naming the field: a NaN compares false with everything and an infinity or a
    negative time turns a slowdown into noise, so the gate could pass what it cannot judge."""
    if not _finite(v) or v < 0:
        raise TraceFormatError(f"{path}: {where} holds {v!r}: a finite number, not negative, "
                               "is expected")
    return float(v)


def _numbers(values: Any, path: str = "", where: str = "") -> tuple[float, ...]:
    return tuple(_amount(v, path, f"{where}[{i}]") for i, v in enumerate(values or ())
                 if isinstance(v, (int, float)) and not isinstance(v, bool))


MIN_STEP_MS = 1e-6
"""A step time under one nanosecond (the finest clock of any profiler read) was not measured."""
MAX_STEP_MS = 1e9
"""Eleven days: no training step is longer; larger numbers (up to 1.8e308) overflowed the mean."""


def _times(values: Any, path: str, key: str) -> tuple[float, ...]:
    """Step times: every one a finite number from `MIN_STEP_MS` to `MAX_STEP_MS`, or the input
    is refused."""
    out = []
    for v in values or ():
        if v is None and key == "times_ms":
            continue  # steps with no time in results that predate the gate (read as absent)
        if not _finite(v) or not MIN_STEP_MS <= v <= MAX_STEP_MS:
            raise TraceFormatError(f"{path}: steps.{key} holds {v!r}: step times must be "
                                   f"numbers from {MIN_STEP_MS:g} to {MAX_STEP_MS:g} ms")
        out.append(float(v))
    return tuple(out)


def _check_consistent(steps: dict[str, Any], times: tuple[float, ...], path: str) -> None:
    """A result's steady steps agree with its own summary of them (`advisor analyze --json`
    writes both from the same steps): their number is ``steps.analysed``, their median
    ``steps.median_ms``, and ``gpu_busy_times_ms`` holds one time per step. A result that
    contradicts itself (steps duplicated or added to the list) is refused, not judged."""
    analysed, median = steps.get("analysed"), steps.get("median_ms")
    if isinstance(analysed, int) and not isinstance(analysed, bool) and analysed != len(times):
        raise TraceFormatError(f"{path}: steps.steady_times_ms holds {len(times)} steps but "
                               f"steps.analysed says {analysed}: the result contradicts itself")
    if times and _finite(median) and not math.isclose(statistics.median(times), median,
                                                      rel_tol=1e-3, abs_tol=1e-3):
        raise TraceFormatError(f"{path}: the median of steps.steady_times_ms is "
                               f"{statistics.median(times):.6g} ms but steps.median_ms says "
                               f"{median:.6g}: the result contradicts itself")
    busy = steps.get("gpu_busy_times_ms")
    if isinstance(busy, list) and busy and len(busy) != len(times):
        raise TraceFormatError(f"{path}: steps.gpu_busy_times_ms holds {len(busy)} steps and "
                               f"steps.steady_times_ms {len(times)}: the result contradicts "
                               "itself")


def _mapping(values: Any, path: str = "", where: str = "") -> dict[str, float]:
    if not isinstance(values, dict):
        return {}
    return {str(k): _amount(v, path, f"{where}[{str(k)[:60]!r}]") for k, v in values.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)}


def _kernels(rows: Any, path: str, where: str) -> tuple[KernelRow, ...]:
    return tuple(
        KernelRow(str(r["name"]), str(r.get("category", "")),
                  _amount(r.get("count_per_step") or 0, path, f"{where}[{i}].count_per_step"),
                  _amount(r.get("ms_per_step") or 0, path, f"{where}[{i}].ms_per_step"),
                  _mapping(r.get("shapes"), path, f"{where}[{i}].shapes"))
        for i, r in enumerate(rows or ()) if isinstance(r, dict) and "name" in r
    )


def _finding(f: dict[str, Any], path: str, where: str, reported: bool) -> FindingRow:
    speedup = f.get("estimated_speedup") or 1.0
    saved = f.get("saved_ms_per_step") or 0.0
    for name, v in (("estimated_speedup", speedup), ("saved_ms_per_step", saved)):
        if not _finite(v):
            raise TraceFormatError(f"{path}: {where}.{name} holds {v!r}: a finite number is "
                                   "expected")
    return FindingRow(f["rule"], f.get("code", ""), float(speedup), float(saved),
                      str(f.get("message", "")) if reported else "", reported)


def _findings(data: dict[str, Any], path: str) -> tuple[FindingRow, ...]:
    rows = [_finding(f, path, f"findings[{i}]", True)
            for i, f in enumerate(data.get("findings") or ())]
    rows += [_finding(f, path, f"below_threshold[{i}]", False)
             for i, f in enumerate(data.get("below_threshold") or ())]
    return tuple(rows)


def from_dict(data: dict[str, Any], path: str, kind: str) -> GateInput:
    """A gate input from the JSON result; older results lacking the gate's keys degrade with a
    note, never silently."""
    version = str(data.get("schema_version", ""))
    if version.split(".")[0] != SUPPORTED_MAJOR:
        raise InputError(f"{path}: advisor result schema {version or '?'}; this advisor reads "
                         f"{SUPPORTED_MAJOR}.x: re-run `advisor analyze --json` with it")
    try:
        trace, steps, kernels = data["trace"], data["steps"], data["kernels"]
    except KeyError as e:
        raise TraceFormatError(f"{path}: not a complete advisor result (no {e.args[0]!r})") from e
    notes: list[str] = []
    times = _times(steps.get("steady_times_ms"), path, "steady_times_ms")
    if "steady_times_ms" in steps:
        _check_consistent(steps, times, path)
    else:
        warm = int(steps.get("warmup") or 0)
        times = _times(steps.get("times_ms"), path, "times_ms")[warm:]
        notes.append(f"{path}: result predates `advisor gate`; steady steps taken as times_ms "
                     f"after the {warm} warm-up step(s)")
    complete = "all" in kernels
    out_of_range = (data.get("model_check") or {}).get("out_of_range")
    if out_of_range:
        notes.append(f"{path}: no speedup estimates: {out_of_range}; the verdict compares the "
                     "traced steps, which that correction does not change")
    return GateInput(
        path=path,
        kind=kind,
        trace_format=str(trace.get("format", "")),
        gpus=tuple(sorted(str(g.get("name", "")) for g in trace.get("gpus") or ())),
        steps_source=str(steps.get("source", "")),
        step_times_ms=times,
        gpu_busy_ms=_numbers(steps.get("gpu_busy_times_ms"), path, "steps.gpu_busy_times_ms"),
        counts=_mapping(steps.get("counts_per_step"), path, "steps.counts_per_step"),
        launch_interval_ms=_mapping(steps.get("launch_interval_ms"), path,
                                    "steps.launch_interval_ms"),
        phases_ms=_mapping(steps.get("phases"), path, "steps.phases"),
        idle_causes_ms=_mapping(steps.get("idle_causes_ms"), path, "steps.idle_causes_ms"),
        categories_ms=_mapping(kernels.get("by_category_ms"), path, "kernels.by_category_ms"),
        kernels=_kernels(kernels.get("all") if complete else kernels.get("top"), path,
                         "kernels.all" if complete else "kernels.top"),
        kernels_complete=complete,
        findings=_findings(data, path),
        skipped={str(s["rule"]): str(s.get("reason", "")) for s in data.get("skipped") or ()},
        notes=tuple(notes) + tuple(trace.get("notes") or ()),
        withheld=_withheld(data),
        steps_described=str((steps.get("detection") or {}).get("description", "")),
        ops=_mapping(steps.get("ops_per_step"), path, "steps.ops_per_step"),
        step_basis_ratio=_basis_ratio(data, times),
        tried=read_tried(data, path),
        steps_held=_steps_held(steps),
        **_process(steps),
    )


_PROCESSES = re.compile(r"the one with the most steps of (\d+) processes")


def _process(steps: dict[str, Any]) -> dict[str, Any]:
    """Which process the steps are of, how it was chosen, and of how many processes. The
    count is the one the step description gives (`advisor.engine.step_basis.StepBasis`): one
    process unless it names more, and unknown when a --pid choice does not say."""
    det = steps.get("detection")
    if not isinstance(det, dict) or det.get("pid") is None:
        return {}
    pid, chosen_by = det.get("pid"), str(det.get("chosen_by") or "")
    match = _PROCESSES.search(str(det.get("description") or ""))
    processes = int(match.group(1)) if match else (1 if chosen_by == "most steps" else 0)
    return {"pid": pid if isinstance(pid, int) and not isinstance(pid, bool) else None,
            "chosen_by": chosen_by, "processes": processes}


def _steps_held(steps: dict[str, Any]) -> int:
    """The steady steps the trace holds: its steps less the warm-up (0 when unknown)."""
    count, warm = steps.get("count"), steps.get("warmup") or 0
    if not isinstance(count, int) or isinstance(count, bool) or not isinstance(warm, int) \
            or isinstance(warm, bool):
        return 0
    return max(0, count - max(0, warm))


def _basis_ratio(data: dict[str, Any], times: tuple[float, ...]) -> float:
    """The report's step over the mean of its steady steps (see `GateInput.step_basis_ratio`)."""
    step = data.get("baseline_step_ms")
    if not _finite(step) or step <= 0 or not times:
        return 1.0
    return float(step) / statistics.fmean(times)


def _withheld(data: dict[str, Any]) -> str | None:
    """The result's reason to withhold estimates (results before 1.1 carry none). Estimates
    withheld for the profiler correction alone (``model_check.out_of_range``) leave the steps
    able to carry a verdict: it compares the steps as traced (`from_dict` notes it)."""
    reason = data.get("estimate_withheld")
    steps = data.get("steps") or {}
    if reason == (data.get("model_check") or {}).get("out_of_range"):
        return None
    if reason and steps.get("analysed"):  # no steps at all is judged by the timing check
        return str(reason)
    return None


def _head(path: Path) -> bytes:
    head = read_head(path, 512)
    if head[:2] == b"\x1f\x8b":
        try:
            with CappedReader(path) as g:
                head = g.read(512)
        except (OSError, EOFError, zlib.error) as e:
            raise InputError(f"{path}: cannot read ({getattr(e, 'strerror', None) or e})") from e
    return head


def is_advisor_result(path: Path) -> bool:
    """An ``advisor analyze --json`` result: its first keys name the advisor version (a
    torch.profiler trace starts with ``schemaVersion``/``deviceProperties`` instead)."""
    return b'"advisor_version"' in _head(path)


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not a number JSON allows")


def _finite_float(text: str) -> float:
    """JSON numbers beyond a double (``1e400``) parse as infinity: refused like ``Infinity``."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:40]} is not a finite number")
    return value


def _bounded_int(text: str) -> int:
    if len(text) > 40:
        raise ValueError("an integer with more than 40 digits")
    return int(text)


def _read_bytes(path: Path) -> bytes:
    size = check_regular(path).st_size
    if read_head(path, 2) == b"\x1f\x8b":
        with CappedReader(path, UnpackLimits(max_bytes=MAX_RESULT_BYTES)) as f:
            return f.read()
    if size > MAX_RESULT_BYTES:
        raise TraceFormatError(f"{path}: {size >> 20} MiB is too large for an advisor result")
    return path.read_bytes()


def _read_result(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(_read_bytes(path).decode("utf-8"), parse_constant=_no_constant,
                          parse_int=_bounded_int, parse_float=_finite_float)
    except (OSError, EOFError, zlib.error) as e:
        raise InputError(f"{path}: cannot read ({getattr(e, 'strerror', None) or e})") from e
    except (UnicodeDecodeError, ValueError) as e:  # JSONDecodeError is a ValueError
        raise TraceFormatError(f"{path}: unreadable advisor result ({str(e)[:200]})") from e
    except RecursionError as e:
        raise TraceFormatError(f"{path}: unreadable advisor result (nested too deeply)") from e
    if not isinstance(data, dict):
        raise TraceFormatError(f"{path}: not an advisor result (not a JSON object)")
    return data


@lru_cache(maxsize=1)
def _validator() -> Any:
    import jsonschema

    from advisor.report.json_report import SCHEMA_PATH

    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return jsonschema.Draft202012Validator(schema)


def validate_result(data: dict[str, Any], path: str) -> None:
    """Refuse a saved result that does not match the shipped schema, naming the first field."""
    version = str(data.get("schema_version", ""))
    if version.split(".")[0] != SUPPORTED_MAJOR:
        return  # from_dict says which schema this advisor reads
    from jsonschema.exceptions import best_match

    error = best_match(_validator().iter_errors(data))
    if error is not None:
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.path)
        raise TraceFormatError(f"{path}: not a valid advisor result: {where.lstrip('.') or 'top level'}: "
                               f"{error.message[:160]}")


def load_input(path: str | Path, load_options: LoadOptions | None = None,
               settings: RuleSettings | None = None) -> GateInput:
    """Read one side of the gate: a trace (analysed now, with ``load_options``: ``--steps``,
    ``--pid``, and ``settings``: the project's [tool.advisor] when None) or a saved advisor
    JSON result."""
    p = Path(path)
    check_regular(p)
    if is_advisor_result(p):
        data = _read_result(p)
        validate_result(data, str(p))
        key = signing.result_key()
        if key is not None and (why := signing.check(data, key, str(p))):
            raise InputError(why)
        return from_dict(data, str(p), "json")
    from advisor.analysis import analyze
    from advisor.config import load_settings
    from advisor.report.json_report import to_dict

    # the project's [tool.advisor] applies, as to the `advisor profile` runs it gates
    settings = settings if settings is not None else load_settings()
    gi = from_dict(to_dict(analyze(p, load_options=load_options, settings=settings)),
                   str(p), "trace")
    off = deselected_rules(settings)
    return replace(gi, notes=(*gi.notes, off)) if off else gi


def deselected_rules(settings: RuleSettings) -> str | None:
    """What the verdict must say when the project's configuration keeps rules from running:
    the pull request the gate judges may change that file, and a rule that does not run finds
    no regression (`--allow` is the gate's own, visible way to accept one; `--isolated` runs
    every rule)."""
    from advisor.config import resolve
    from advisor.engine.registry import load_rules

    every = load_rules()
    chosen, _ = resolve(every, settings)
    names = {r.name for r in chosen}
    off = sorted(r.name for r in every if r.name not in names)
    if not off:
        return None
    where = settings.source or "the settings"
    return (f"rules not run, deselected by {where}: {', '.join(off)} (a regression they would "
            f"name is not judged; `advisor gate --isolated` runs every rule)")
