"""Wall time of every ``seqlab demo`` (goal: each under 2 minutes on 2 CPU cores).

Runs the demos one after another, each as its own process with the machine to itself, and
records each one's wall time next to the 120-second goal (a ratio, in the same run) and the
machine. ``dates`` (``make demo``) and ``vit-vs-cnn`` (an MNIST experiment with a time budget of
its own) are reported by their own commands, not here; ``positions``, ``norm-placement`` and
``training-choices`` read The Time Machine (``SEQLAB_DATA_DIR`` or the cache).

Usage: ``python benchmarks/demo_times.py [--only NAME,NAME] [--keep DIR]`` (``--keep``: each
demo's figures, JSON and printed summary stay in ``DIR/NAME``; by default they go to a temporary
folder).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from seqlab.atomic import atomic_write_json
from seqlab.demos import DEMOS
from seqlab.runtime.machine import machine
from seqlab.runtime.precision import resolve_precision

GOAL_S = 120.0
SKIP = {"dates": "make demo", "vit-vs-cnn": "its own --max-minutes budget"}


def demo_precision() -> str:
    """What the demos compute in: their training configs say auto; inference is fp32."""
    return f"train {resolve_precision('auto').precision} (auto), inference fp32"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", help="comma-separated demo names")
    parser.add_argument("--keep", metavar="DIR", help="keep each demo's output in DIR/NAME")
    args = parser.parse_args()
    names = args.only.split(",") if args.only else [n for n in DEMOS if n not in SKIP]
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.keep or tmp)
        for name in names:
            start = time.monotonic()
            out = subprocess.run(
                [sys.executable, "-m", "seqlab", "demo", name, "--out", str(root / name)],
                capture_output=True,
                text=True,
            )
            seconds = time.monotonic() - start
            if args.keep:
                (root / f"{name}.stdout.txt").write_text(out.stdout + out.stderr)
            rows[name] = {
                "seconds": round(seconds, 1),
                "share_of_goal": round(seconds / GOAL_S, 3),
                "ok": out.returncode == 0,
            }
            status = "ok" if out.returncode == 0 else f"FAILED: {out.stderr.strip()[-300:]}"
            print(f"{name:24s} {seconds:7.1f} s  ({seconds / GOAL_S:.2f} of 2 min)  {status}")
    result = {
        "goal_seconds": GOAL_S,
        "demos": rows,
        "skipped": SKIP,
        "machine": machine(demo_precision()),
    }
    path = Path(__file__).resolve().parent / "results" / "demo_times.json"
    atomic_write_json(path, result)
    print(f"wrote {path}")
    if not all(r["ok"] for r in rows.values()):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
