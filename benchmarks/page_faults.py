"""Page faults of a decoding pass, with and without seqlab's process settings
(``seqlab.runtime.allocator``): PyTorch's huge pages for large buffers, and glibc's malloc
keeping freed memory for reuse.

Four settings, each in a fresh process, taking turns, ``--repeats`` rounds: ``default`` (neither,
as ``import seqlab`` leaves a program), ``huge pages``, ``freed kept``, and ``both`` (what the
``seqlab`` command sets). Each process loads ``--run`` (default the README's
``runs/m30-en-de-transformer``) as ``seqlab translate --threads 1 --workers 1`` does, decodes the
first 256 sentences to warm up, then times one pass over ``--sentences`` validation sentences
with ``--beam``, reading the process's minor page faults and user and kernel CPU time around it
(``getrusage``). Reported per setting: the best wall time, and the faults and kernel time of
that pass.

    SEQLAB_DATA_DIR=../shared/data .venv/bin/python benchmarks/page_faults.py \\
        [--run RUN] [--beam 5] [--sentences 512] [--repeats 2]

Prints a table; writes nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_RUN = ROOT / "runs" / "m30-en-de-transformer"
#: setting -> (huge pages, freed memory kept)
SETTINGS = {
    "default": (False, False),
    "huge pages": (True, False),
    "freed kept": (False, True),
    "both": (True, True),
}
CHILD = "--child"


def child(spec: dict) -> dict:
    """In a fresh process: the setting, the run loaded, a warm-up, one measured pass."""
    import resource

    huge, kept = SETTINGS[spec["setting"]]
    os.environ["THP_MEM_ALLOC_ENABLE"] = "1" if huge else "0"  # before the first tensor
    from seqlab.runtime.allocator import keep_freed_memory

    if kept and not keep_freed_memory():
        raise SystemExit("glibc's malloc settings could not be changed here")
    from seqlab.cli import build_parser
    from seqlab.cli.infer import load_run
    from seqlab.tasks.translation import load_pairs

    flags = ["--engine", "seqlab", "--beam", str(spec["beam"]), "--threads", "1", "--workers", "1"]
    model = load_run(build_parser().parse_args(["translate", "--run", spec["run"], *flags]))[0]
    sources = [s for s, _ in load_pairs(model.cfg)["val"]][: spec["sentences"]]
    run = {"beam": spec["beam"], "engine": "seqlab", "quantize": None}
    model.hypotheses(sources[:256], **run)  # warm-up
    before, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    model.hypotheses(sources, **run)
    seconds, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF)
    return {
        "seconds": seconds,
        "faults": after.ru_minflt - before.ru_minflt,
        "user_s": after.ru_utime - before.ru_utime,
        "kernel_s": after.ru_stime - before.ru_stime,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, default=DEFAULT_RUN)
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--sentences", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    if not (args.run / "checkpoints").is_dir():
        raise SystemExit(f"{args.run}: not a trained run (see benchmarks/translation_decoding.py)")
    env = {k: v for k, v in os.environ.items() if k != "THP_MEM_ALLOC_ENABLE"}
    best: dict[str, dict] = {}
    for _ in range(args.repeats):
        for setting in SETTINGS:
            spec = {"setting": setting, "run": str(args.run), "beam": args.beam}
            spec["sentences"] = args.sentences
            out = subprocess.run(
                [sys.executable, __file__, CHILD, json.dumps(spec)],
                capture_output=True,
                text=True,
                env=env,
                check=False,
            )
            if out.returncode:
                raise SystemExit(f"{setting} failed:\n{out.stderr[-3000:]}")
            found = json.loads(out.stdout.strip().splitlines()[-1])
            if found["seconds"] < best.get(setting, {}).get("seconds", 1e99):
                best[setting] = found
    from seqlab.runtime.machine import cpu_model

    print(f"# {cpu_model()}, fp32, 1 thread, beam {args.beam}, {args.sentences} sentences")
    print(f"{'setting':12s} {'wall':>8s} {'faults':>9s} {'kernel':>8s} {'user':>8s}")
    for setting, r in best.items():
        print(
            f"{setting:12s} {r['seconds']:7.2f}s {r['faults']:9,d} "
            f"{r['kernel_s']:7.2f}s {r['user_s']:7.2f}s"
        )


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == CHILD:
        print(json.dumps(child(json.loads(sys.argv[2]))))
    else:
        main()
