"""nsys-ai's tensor-core share and MFU beside advisor's, on the repository's nsys exports
(docs/peers.md, "Measured side by side").

Run with the Python that has advisor; ``--nsys-ai`` names the CLI of a separate environment
(nsys-ai 0.3.0 and its dependencies, never installed beside advisor). nsys-ai builds a cache
beside each export, so the exports are decompressed into ``--work``. Prints one JSON line per
export: nsys-ai ``tensor_core_usage`` (whole export: eligible and active ms) against advisor's
``efficiency`` (its analysed steps); with ``--mfu-step NAME --flops F``, nsys-ai ``region_mfu``
of that NVTX range too.

    python benchmarks/peers/nsysai_side_by_side.py --nsys-ai /venv/bin/nsys-ai --work /tmp/w \\
        fixtures/public/nanogpt/wave4-nsys-flags/gpt2-default.sqlite.gz fixtures/scenarios/*/*/nsys.sqlite.gz
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path


def nsysai(cli: str, skill: str, db: Path, *params: str) -> list[dict]:
    """One skill's JSON answer; ``[{"error": ...}]`` when it gave none."""
    cmd = [cli, "skill", "run", skill, str(db), "--format", "json"]
    for p in params:
        cmd += ["-p", p]
    r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ), check=False)
    try:
        return json.loads(r.stdout)
    except ValueError:
        return [{"error": (r.stdout + r.stderr).strip()[-300:]}]


def advisor_efficiency(path: Path, work: Path) -> dict:
    """The ``efficiency`` section of ``advisor analyze --json`` (the CLI beside this Python)."""
    out = work / "advisor.json"
    out.unlink(missing_ok=True)
    cli = shutil.which("advisor", path=str(Path(sys.executable).parent)) or "advisor"
    subprocess.run([cli, "analyze", str(path), "--json", str(out)], capture_output=True,
                   check=False)
    return (json.loads(out.read_text()).get("efficiency") or {}) if out.exists() else {}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("exports", nargs="+", type=Path)
    ap.add_argument("--nsys-ai", required=True, help="the nsys-ai CLI of its own environment")
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--mfu-step", help="an NVTX range for region_mfu (exact name)")
    ap.add_argument("--flops", type=float, help="model FLOPs per step for region_mfu")
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    for path in args.exports:
        db = args.work / path.as_posix().replace("/", "__").removesuffix(".gz")
        if not db.exists():
            with gzip.open(path) as src, open(db, "wb") as dst:
                shutil.copyfileobj(src, dst)
        rows = nsysai(args.nsys_ai, "tensor_core_usage", db, "limit=1000")
        ok = [r for r in rows if "error" not in r]
        eligible = sum(r["total_gpu_ms"] for r in ok)
        active = sum(r["tc_active_ms"] for r in ok)
        e = advisor_efficiency(path, args.work)
        rec = {"export": str(path), "nsysai_eligible_ms": round(eligible, 2),
               "nsysai_tc_share": round(active / eligible, 4) if eligible else None,
               "nsysai_kernels": [r["kernel_name"][:60] for r in ok][:5],
               "nsysai_error": next((r["error"] for r in rows if "error" in r), None),
               "advisor_tc_share": e.get("tensor_core_share"),
               "advisor_gemm_ms_per_step": e.get("gemm_ms_per_step"),
               "advisor_mfu": e.get("mfu_text")}
        if args.mfu_step and args.flops:
            m = nsysai(args.nsys_ai, "region_mfu", db, f"name={args.mfu_step}", "match_mode=exact",
                       f"theoretical_flops={args.flops}")[0]
            rec["nsysai_region_mfu"] = {k: m.get(k) for k in (
                "wall_time_s", "gpu_kernel_sum_s", "kernel_count", "mfu_pct_wall",
                "mfu_pct_kernel_sum", "error")}
        print(json.dumps(rec), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
