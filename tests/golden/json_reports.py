"""The JSON result of `advisor analyze` on every fixture, for the byte-identity test beside it.

Issue #16 rebuilt the report around one model (`advisor.report.model`) with the promise that the
JSON does not change by a byte. This records, per test trace (``fixtures/manifest.toml``; the
evidence archive ``fixtures/archive/`` is not swept) and per trace in ``advisor/examples/``,
the exact text `advisor analyze --json` writes, with the two fields that depend on the machine
rather than the analysis normalised (`normalise`):

- ``trace.path``: the absolute path the trace was read from -> its path relative to the
  repository root (a checkout elsewhere must compare equal);
- ``advisor_version``: the installed distribution's version -> ``"<version>"`` (a release bump
  is no change of the report).

Everything else, numbers to the last digit, key order and indentation included, is compared as
written. The golden files are written only on request, after review:

    python tests/golden/json_reports.py --write        # regenerate tests/golden/json/*.json
    python tests/golden/json_reports.py TRACE...       # print the normalised JSON of some traces

The test (`test_json_reports.py`) never rewrites them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script (`python tests/golden/...`): `tests` importable
    sys.path.insert(0, str(ROOT))
GOLDEN_DIR = Path(__file__).with_name("json")
SUFFIXES = (".sqlite", ".sqlite.gz", ".json.gz")


def trace_keys() -> list[str]:
    """The manifest's test traces and the packaged examples, relative to the repository root."""
    from tests.fixture_manifest import trace_keys as fixture_keys

    examples = [str(p.relative_to(ROOT)) for p in (ROOT / "advisor" / "examples").rglob("*")
                if p.name.endswith(SUFFIXES)]
    return sorted(fixture_keys() + examples)


def golden_path(key: str) -> Path:
    """One file per trace: its path with ``/`` as ``__`` (``fixtures__public__...json``)."""
    return GOLDEN_DIR / (key.replace("/", "__") + ".json")


def normalise(data: dict, key: str) -> dict:
    """The report with its machine-dependent fields replaced (see the module docstring)."""
    data = dict(data)
    data["advisor_version"] = "<version>"
    if "trace" in data:
        data["trace"] = {**data["trace"], "path": key}
    return data


def render(data: dict) -> str:
    """Exactly as `advisor.report.json_report.write_json` lays the file out."""
    return json.dumps(data, indent=2, sort_keys=False) + "\n"


def main() -> None:
    from advisor.analysis import analyze
    from advisor.report.json_report import to_dict

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="*", help="keys to print (default: all)")
    parser.add_argument("--write", action="store_true", help=f"rewrite {GOLDEN_DIR}/")
    args = parser.parse_args()
    keys = args.traces or trace_keys()
    if args.write:
        GOLDEN_DIR.mkdir(exist_ok=True)
    for key in keys:
        print(key, file=sys.stderr)
        text = render(normalise(to_dict(analyze(ROOT / key)), key))
        if args.write:
            golden_path(key).write_text(text, encoding="utf-8")
        else:
            sys.stdout.write(text)


if __name__ == "__main__":
    main()
