"""Pack `harness.py ab` blocks into one file per fixed step, for the archive.

``python benchmarks/public/ab_pack.py UNPACKED_AB_TGZ DEST`` writes
``DEST/<shape>-<scenario>-ab.json`` (``{"base": [block, ...], "compile": [...],
"scenario_info": ...}``, each block its ``block`` index, ``variant``, ``fix``, ``per_step_ms``,
``step_ms_cuda_events`` and ``env``, in block order) and copies the logs.
``tests/healthy_findings.py`` reads them (``Timed(..., paired=True)``).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path


def pack(group: Path) -> dict:
    out: dict = {}
    for f in sorted(group.glob("ab-*-*.json"), key=lambda p: int(p.stem.rsplit("-", 1)[1])):
        d = json.loads(f.read_text())
        kind = f.stem.split("-", 1)[1].rsplit("-", 1)[0]
        out.setdefault(kind, []).append({k: d[k] for k in ("block", "variant", "fix", "per_step_ms",
                                                           "step_ms_cuda_events", "env")})
        out.setdefault("scenario_info", d.get("scenario_info"))
    return out


def main(src: str, dest: str) -> None:
    s, d = Path(src), Path(dest)
    (d / "logs").mkdir(parents=True, exist_ok=True)
    for group in sorted(p for p in s.iterdir() if p.is_dir() and p.name != "logs"):
        (d / f"{group.name}-ab.json").write_text(json.dumps(pack(group), indent=0))
    for f in (s / "logs").glob("*.log"):
        shutil.copy(f, d / "logs" / f.name)
    for name in ("env.txt", "pin.txt"):
        if (s / name).exists():
            shutil.copy(s / name, d / name)


if __name__ == "__main__":
    main(*sys.argv[1:3])
