"""The GPU path (issue 50): what seqlab does on one CUDA GPU, measured in one run, into one JSON.

Made for a lent GPU machine that runs one prepared script for a few minutes
(``benchmarks/gpu_check.sh``); every section fits a time budget (``--budget``, default 420 s) and
is skipped, with the reason recorded, when too little of it is left. The JSON is rewritten
atomically after every section, so a run cut short keeps the sections it finished. Sections, in
the order they run (``--sections`` picks some):

- ``tests``: ``python -m pytest -q -p no:cacheprovider -m cuda tests`` in a subprocess, with a
  timeout (the ``cuda`` cases of the device-parametrized tests, ``tests/devices.py``; 4 xdist
  workers unless ``--test-workers 0``, and a module that fails to import does not stop the
  others): passed, failed, skipped and the names of the failures.
- ``training_throughput``: real target tokens/s of seqlab's tiny Multi30k Transformer
  (``multi30k-en-de-transformer-tiny``, built as ``benchmarks/translation_training.py`` builds
  it) against ``nn.Transformer`` of the same size (that script's ``ReferenceTransformer``), both
  under the same bf16 autocast on the same GPU, on the same length-bucketed batches (moved to the
  GPU once per step, outside the timings), the same objective (label-smoothed cross-entropy over
  the real target tokens: seqlab's fused loss, ``F.cross_entropy`` for the reference), the same
  fused AdamW and gradient clipping; steps alternate (and which model goes first), warm-up steps
  excluded, ``torch.cuda.synchronize()`` around every timing. Also the share of the GPU's bf16
  dense peak: useful FLOPs per step (``translation_training.training_flops``) over step time,
  against a measured bf16 ``torch.mm`` peak (8192² matrices) and the nominal dense bf16 peak of
  the card looked up by name (H100 SXM 989 TFLOP/s, H100 PCIe 756, H200 989). Goal: seqlab
  ≥ 1.5× ``nn.Transformer``.
- ``multi30k_tiny``: the tiny Multi30k recipe as configured (8000 steps) trained on the GPU
  (``seqlab train ... train.device=cuda``) with ``train.max_minutes`` set to what the budget
  leaves: steps reached, wall time, tokens/s, validation BLEU, test BLEU (``seqlab evaluate
  --run DIR --split test``), whether the recipe finished or the budget cut it, and the projected
  wall time of all 8000 steps.
- ``decoding``: that run (or, without it, a short one trained here) decoding the Multi30k
  validation set, greedy and beam 5: seqlab's own search (fp32 and bf16 autocast) against
  CTranslate2 on ``device="cuda"`` (float32, and float16/bfloat16 where it runs them) on the
  same weights (the run's export), the same sentences and batches of 128, warm (a warm-up pass,
  then the best of 2). Where CTranslate2 cannot run on CUDA there (it needs CUDA 12 libraries;
  PyTorch may bring CUDA 13) the error is recorded and CTranslate2 is measured on the CPU
  instead, labelled so. Goal: seqlab ≥ 1.0× CTranslate2.
- ``epochs``: wall time of one epoch of an audio recipe (``fsdd-cnn``) and of a language model
  recipe (``shakespeare-char-transformer``), each ``python -m seqlab train CONFIG
  train.device=cuda train.epochs=1 ... --out DIR`` in a subprocess; skipped, with the reason,
  where the dataset is absent (FSDD does not travel with the others).
- memory: every section records ``torch.cuda.max_memory_allocated`` (reset before it) and, for
  its subprocesses, the peak device memory in use (all processes, sampled).

Run it on the GPU machine (see ``benchmarks/gpu_check.sh``, which installs the carried wheels and
points ``SEQLAB_DATA_DIR`` at the carried datasets)::

    python3 benchmarks/gpu.py --out "$OUT/gpu.json" --budget 420

Without CUDA (or with ``--dry-run``) every section runs at a tiny size on the CPU to prove its
code path and writes to a temporary file, never to ``benchmarks/results/gpu.json``::

    SEQLAB_DATA_DIR=../shared/data .venv/bin/python benchmarks/gpu.py --dry-run
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "gpu.json"
TINY = "multi30k-en-de-transformer-tiny"
#: the sections, in the order they run
ORDER = ("tests", "training_throughput", "multi30k_tiny", "decoding", "epochs")
#: seconds a section needs at least (less left: skipped), and what it leaves for the later ones
NEEDS = {"tests": 30, "training_throughput": 30, "multi30k_tiny": 90, "decoding": 30, "epochs": 20}
RESERVE = {"tests": 0, "training_throughput": 30, "multi30k_tiny": 0, "decoding": 50, "epochs": 75}
#: the longest a section may take, whatever is left
CAP = {"tests": 75, "training_throughput": 60, "decoding": 90, "epochs": 120}
#: nominal dense (not 2:4 sparse) bf16 tensor-core peaks, TFLOP/s, by a piece of the card's name:
#: the first piece found in ``torch.cuda.get_device_name()`` decides
NOMINAL_BF16_TFLOPS = (
    ("H100 PCIe", 756.0, "H100 PCIe"),
    ("H100 NVL", 835.0, "H100 NVL (half the sparse figure)"),
    ("H200 NVL", 835.0, "H200 NVL (half the sparse figure)"),
    ("H200", 989.0, "H200 SXM"),
    ("H100", 989.0, "H100 SXM"),
    ("A100", 312.0, "A100"),
)
#: sections that time work in this process (no memory-sampling thread beside them)
IN_PROCESS = ("training_throughput", "decoding")
GOALS = {"training_ratio_vs_nn_transformer": 1.5, "decoding_ratio_vs_ctranslate2": 1.0}


# ------------------------------------------------------------------------------------ helpers
def now() -> float:
    return time.monotonic()


class Clock:
    """The run's time budget."""

    def __init__(self, budget: float) -> None:
        self.start, self.budget = now(), budget

    def used(self) -> float:
        return now() - self.start

    def left(self) -> float:
        return self.budget - self.used()


def write_json(path: Path, obj: Any) -> None:
    """Write ``obj`` to ``path`` atomically (a temporary file beside it, then a rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(obj, indent=2, default=str) + "\n")
    os.replace(tmp, path)


def cuda() -> bool:
    return torch.cuda.is_available()


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def tail(path: Path, chars: int = 3000) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")[-chars:]
    except OSError:
        return ""


def run_logged(cmd: list[str], log: Path, timeout: float, grace: float = 20.0) -> dict[str, Any]:
    """Run ``cmd`` in the repository root, its stdout into ``log`` and its stderr into
    ``log.err``. At ``timeout`` it gets SIGINT (seqlab saves a checkpoint and stops), ``grace``
    seconds later SIGKILL with its process group."""
    log.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT / "src"), env.get("PYTHONPATH", "")) if p
    )
    start, timed_out = now(), False
    with open(log, "w") as out, open(log.with_suffix(".err"), "w") as err:
        proc = subprocess.Popen(
            cmd, cwd=ROOT, stdout=out, stderr=err, env=env, start_new_session=True
        )
        try:
            rc = proc.wait(timeout=max(timeout, 1.0))
        except subprocess.TimeoutExpired:
            timed_out = True
            proc.send_signal(signal.SIGINT)
            try:
                rc = proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                rc = proc.wait()
    return {
        "command": " ".join(cmd),
        "rc": rc,
        "timed_out": timed_out,
        "wall_s": round(now() - start, 2),
        "log": str(log),
    }


def last_json_line(path: Path) -> dict[str, Any] | None:
    for line in reversed(tail(path, 5_000_000).splitlines()):
        line = line.strip()
        if line.startswith("{"):
            with contextlib.suppress(ValueError):
                return json.loads(line)
    return None


def read_metrics(run_dir: Path) -> list[dict[str, Any]]:
    out = []
    with contextlib.suppress(OSError):
        for line in (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines():
            with contextlib.suppress(ValueError):
                out.append(json.loads(line))
    return out


def has_checkpoint(run_dir: Path) -> bool:
    return (run_dir / "checkpoints").is_dir() and any((run_dir / "checkpoints").iterdir())


class DeviceMemory:
    """Peak device memory in use (every process, CUDA contexts included), sampled in a thread
    while subprocesses run: what ``max_memory_allocated`` of this process cannot see."""

    def __init__(self, period: float = 0.25, enabled: bool = True) -> None:
        self.period, self.peak, self.baseline, self.enabled = period, 0, 0, enabled
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @staticmethod
    def used() -> int:
        free, total = torch.cuda.mem_get_info()
        return int(total - free)

    def __enter__(self) -> DeviceMemory:
        if cuda():
            self.baseline = self.peak = self.used()
        if cuda() and self.enabled:
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(self.period):
            with contextlib.suppress(Exception):
                self.peak = max(self.peak, self.used())

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


# ----------------------------------------------------------------------------- the device
def device_info(device: torch.device) -> dict[str, Any]:
    from seqlab.runtime.machine import cpu_count, cpu_model

    info: dict[str, Any] = {
        "device": str(device),
        "torch": torch.__version__,
        "cuda_version": torch.version.cuda,
        "python": sys.version.split()[0],
        "cpu": cpu_model(),
        "cpus": cpu_count(),
        "torch_threads": torch.get_num_threads(),
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info |= {
            "name": torch.cuda.get_device_name(device),
            "capability": "{}.{}".format(*torch.cuda.get_device_capability(device)),
            "memory_bytes": int(props.total_memory),
            "multiprocessors": int(props.multi_processor_count),
            "cudnn": torch.backends.cudnn.version(),
            "bf16_supported": torch.cuda.is_bf16_supported(),
            "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
        }
        with contextlib.suppress(Exception):
            smi = subprocess.run(
                [
                    "nvidia-smi",
                    "--query-gpu=driver_version,power.limit,clocks.max.sm",
                    "--format=csv,noheader",
                ],
                capture_output=True,
                text=True,
                timeout=20,
            )
            info["nvidia_smi"] = smi.stdout.strip()
    with contextlib.suppress(Exception):
        import ctranslate2

        info["ctranslate2"] = ctranslate2.__version__
    return info


def nominal_bf16_peak(name: str) -> dict[str, Any] | None:
    for piece, tflops, what in NOMINAL_BF16_TFLOPS:
        if piece.lower() in name.lower():
            return {"flop_per_s": tflops * 1e12, "card": what, "matched": piece}
    return None


def measured_mm_peak(device: torch.device, dry: bool) -> dict[str, Any]:
    """The best ``torch.mm`` throughput on large square matrices: bf16 on a GPU; on a CPU (dry
    run) seqlab's own measurement, fp32."""
    if device.type != "cuda":
        from seqlab.runtime.machine import matmul_peak

        return {"flop_per_s": matmul_peak(torch.float32, n=256), "dtype": "fp32", "n": 256}
    n, inner = 8192, 10
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    best = math.inf
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(inner):
            a @ b
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / 1000 / inner)
    del a, b
    return {"flop_per_s": 2 * n**3 / best, "dtype": "bf16", "n": n}


# ------------------------------------------------------------------------------ the context
class Context:
    def __init__(self, args: argparse.Namespace, device: torch.device, clock: Clock) -> None:
        self.args, self.device, self.clock = args, device, clock
        self.dry = args.dry_run
        self.workdir = Path(args.workdir or tempfile.mkdtemp(prefix="seqlab-gpu-"))
        self.logs = self.workdir / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.shared: dict[str, Any] = {}  # what one section leaves for another (the run)

    @property
    def device_override(self) -> str:
        return f"train.device={self.device.type}"

    def limit(self, seconds: float, grace: float = 25.0) -> float:
        """``seconds``, cut so that a subprocess stopped at its end (SIGINT, then ``grace``
        seconds to finish) still ends within the run's budget."""
        return max(1.0, min(seconds, self.clock.left() - grace))

    def fresh(self, name: str) -> Path:
        """``workdir/name`` for a new run (an earlier run of this script there is removed)."""
        path = self.workdir / name
        shutil.rmtree(path, ignore_errors=True)
        return path

    def seqlab(self, *argv: str) -> list[str]:
        return [sys.executable, "-m", "seqlab", *argv]


#: dry run: the tiny recipe at a size that trains and decodes in seconds on a CPU
DRY_TINY = [
    "data.num_examples=400",
    "data.subword.vocab_size=400",
    "train.max_steps=3",
    "train.eval_every=3",
    "decode.max_len_a=0.0",
    "decode.max_len_b=3",
]


# --------------------------------------------------------------------------------- a. tests
def section_tests(ctx: Context, deadline: float) -> dict[str, Any]:
    targets = ["tests/test_losses.py"] if ctx.dry else ["tests"]
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "cuda"]
    cmd += ["--continue-on-collection-errors"]  # one broken module must not hide the others
    if ctx.args.test_workers and not ctx.dry:  # pytest-xdist, as `make test` runs the suite
        cmd += ["-n", str(ctx.args.test_workers), "--dist", "loadfile"]
    log = ctx.logs / "tests.log"
    ran = run_logged([*cmd, *targets], log, ctx.limit(deadline - now(), 5), grace=5)
    text = tail(log, 400_000)
    counts = {}
    summary = next(
        (
            ln
            for ln in reversed(text.splitlines())
            if re.search(r"\b(passed|failed|error|no tests ran|deselected|skipped)\b", ln)
        ),
        "",
    )
    for number, what in re.findall(
        r"(\d+) (passed|failed|skipped|deselected|errors?|xfailed|xpassed)", summary
    ):
        counts[what.rstrip("s") if what.startswith("error") else what] = int(number)
    failures = re.findall(r"^(?:FAILED|ERROR) (\S+)", text, flags=re.M)
    return {
        **ran,
        "targets": targets,
        "summary": summary.strip("= "),
        "passed": counts.get("passed", 0),
        "failed": counts.get("failed", 0),
        "errors": counts.get("error", 0),
        "skipped": counts.get("skipped", 0),
        "deselected": counts.get("deselected", 0),
        "failures": failures,
        "ok": ran["rc"] == 0 and not ran["timed_out"],
        "note": "exit code 5: no test carries the cuda marker" if ran["rc"] == 5 else None,
    }


# ------------------------------------------------------------------ b. training_throughput
def benchmarks_module(name: str) -> Any:
    """A sibling benchmark script imported as a module (its code reused, not copied)."""
    here = str(Path(__file__).resolve().parent)
    if here not in sys.path:
        sys.path.insert(0, here)
    return __import__(name)


@contextlib.contextmanager
def causal_mask_on(device: torch.device) -> Iterator[None]:
    """``nn.Transformer.generate_square_subsequent_mask`` making its mask on ``device``: the
    reference builds it without a device (the CPU), as CPU code does; CUDA code passes the
    inputs' device."""
    saved = nn.Transformer.__dict__["generate_square_subsequent_mask"]
    original = saved.__func__ if isinstance(saved, staticmethod) else saved

    def on_device(sz: int, device_: Any = None, dtype: Any = None) -> torch.Tensor:
        return original(sz, device=device_ or device, dtype=dtype)

    nn.Transformer.generate_square_subsequent_mask = staticmethod(on_device)  # type: ignore[method-assign]
    try:
        yield
    finally:
        nn.Transformer.generate_square_subsequent_mask = saved  # type: ignore[method-assign]


def forever(batches: Any) -> Iterator[Any]:
    while True:
        yield from batches


def section_training_throughput(ctx: Context, deadline: float) -> dict[str, Any]:
    from seqlab.config import load_config
    from seqlab.data.translation_batching import TranslationBatches
    from seqlab.runtime.precision import autocast, resolve_precision
    from seqlab.tasks.translation import build_experiment
    from seqlab.tokens import PAD
    from seqlab.training.distributed import to_device

    tt = benchmarks_module("translation_training")
    device, dry = ctx.device, ctx.dry
    overrides = ["data.num_examples=1000", "data.subword.vocab_size=500"] if dry else []
    warmup, steps = (1, 3) if dry else (ctx.args.warmup_steps, ctx.args.steps)
    cfg = load_config(TINY, overrides)
    exp = build_experiment(cfg)
    m, vocab = cfg.model, exp.meta["tgt_vocab_size"]
    ours = exp.model.to(device)
    ref = tt.ReferenceTransformer(
        exp.meta["src_vocab_size"], vocab, m.d_model, m.num_heads, m.encoder_layers,
        m.decoder_layers, m.d_ff, m.dropout,
    ).to(device)  # fmt: skip
    precision = resolve_precision(cfg.train.precision, device)
    lr = 1e-4  # constant: the recipe's peak (5e-3) without its warm-up would diverge
    fused = device.type == "cuda"

    def adamw(model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.AdamW(
            model.parameters(), lr=lr, betas=tuple(cfg.train.betas), weight_decay=0.0, fused=fused
        )

    opt_ours, opt_ref = adamw(ours), adamw(ref)
    smoothing = cfg.train.label_smoothing
    batches = forever(
        TranslationBatches(exp.train_batches.data, cfg.data.batch_tokens, bucket=True, seed=1)
    )
    ours.train()
    ref.train()

    def step_ours(batch: Any) -> None:
        with autocast(precision, device):
            loss, _ = ours.loss(batch, label_smoothing=smoothing)
        tt.update(ours, opt_ours, loss)

    def step_ref(batch: Any) -> None:
        with autocast(precision, device):
            logits = ref(batch.src, batch.tgt_in)
            loss = F.cross_entropy(
                logits.reshape(-1, logits.shape[-1]),
                batch.tgt_out.reshape(-1),
                ignore_index=PAD,
                label_smoothing=smoothing,
            )
        tt.update(ref, opt_ref, loss)

    runners = {"seqlab": step_ours, "nn_transformer": step_ref}
    times: dict[str, list[float]] = {k: [] for k in runners}
    tokens, flops, done = 0, 0, 0
    cut = ""
    with causal_mask_on(device):
        for i in range(warmup + steps):
            if i >= warmup and now() > deadline - 5:
                cut = f"stopped after {done} measured steps: the section's time ran out"
                break
            cpu_batch = next(batches)
            batch = to_device(cpu_batch, device)
            order = list(runners) if i % 2 == 0 else list(reversed(runners))
            for name in order:
                sync(device)
                start = now()
                runners[name](batch)
                sync(device)
                if i >= warmup:
                    times[name].append(now() - start)
            if i >= warmup:
                done += 1
                tokens += int((cpu_batch.tgt_out != PAD).sum())
                flops += tt.training_flops(cpu_batch, m, vocab)
    if not done:
        raise RuntimeError("no step measured within the section's time")
    profiles = {}
    if device.type == "cuda" and deadline - now() > 10:  # where a step's time goes
        from torch.profiler import ProfilerActivity, profile

        batch = to_device(next(batches), device)
        for name, runner in runners.items():
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                for _ in range(3):
                    runner(batch)
                sync(device)
            table = prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=12)
            profiles[name] = table
            print(f"-- profile of 3 steps, {name}\n{table}", flush=True)
    total = {k: sum(v) for k, v in times.items()}
    rate = {k: tokens / s for k, s in total.items()}
    useful = {k: flops / s for k, s in total.items()}
    peak = measured_mm_peak(device, dry)
    nominal = (
        nominal_bf16_peak(torch.cuda.get_device_name(device)) if device.type == "cuda" else None
    )
    ratio = rate["seqlab"] / rate["nn_transformer"]
    goal = GOALS["training_ratio_vs_nn_transformer"]
    return {
        "config": TINY,
        "overrides": overrides,
        "precision": precision.precision,
        "precision_reason": precision.reason,
        "optimizer": f"AdamW(lr={lr}, betas={tuple(cfg.train.betas)}, fused={fused}), clip 1.0",
        "batch_tokens": cfg.data.batch_tokens,
        "warmup_steps": warmup,
        "steps": done,
        "cut": cut or None,
        "parameters": {
            "seqlab": sum(p.numel() for p in ours.parameters()),
            "nn_transformer": sum(p.numel() for p in ref.parameters()),
        },
        "target_tokens": tokens,
        "target_tokens_per_s": rate,
        "profiles": profiles or None,
        "median_step_s": {k: statistics.median(v) for k, v in times.items()},
        "ratio": ratio,
        "goal_ratio": goal,
        "goal_met": ratio >= goal,
        "useful_flops_per_step": flops / done,
        "useful_flop_per_s": useful,
        "measured_mm_peak": peak,
        "share_of_measured_peak": {k: v / peak["flop_per_s"] for k, v in useful.items()},
        "nominal_bf16_dense_peak": nominal,
        "share_of_nominal_peak": (
            {k: v / nominal["flop_per_s"] for k, v in useful.items()} if nominal else None
        ),
    }


# ---------------------------------------------------------------------- e. multi30k_tiny
def train_tiny(ctx: Context, name: str, extra: list[str], train_s: float, timeout: float) -> dict:
    """``seqlab train`` the tiny recipe into ``workdir/name`` for at most ``train_s`` seconds of
    training (``train.max_minutes``), the process stopped at ``timeout``."""
    run_dir = ctx.fresh(name)
    minutes = max(train_s / 60, 0.1)
    overrides = [ctx.device_override, f"train.max_minutes={minutes:.2f}", *extra]
    if ctx.dry:
        overrides += DRY_TINY
    ran = run_logged(
        ctx.seqlab("train", TINY, *overrides, "--out", str(run_dir)),
        ctx.logs / f"{name}.log",
        ctx.limit(timeout),
    )
    ran["overrides"] = overrides
    ran["run_dir"] = str(run_dir)
    for f in ("run.json", "metrics.jsonl", "config.yaml"):
        with contextlib.suppress(OSError):
            (ctx.logs / f"{name}.{f}").write_bytes((run_dir / f).read_bytes())
    return ran


def summarize_run(run_dir: Path, planned_steps: int | None) -> dict[str, Any]:
    records = read_metrics(run_dir)
    train = [r for r in records if r.get("kind") == "train"]
    evals = [r for r in records if r.get("kind") == "eval"]
    end = next((r for r in records if r.get("kind") == "end"), {})
    average = next((r for r in records if r.get("kind") == "average"), None)
    rates = [r["tokens_per_s"] for r in train if r.get("step", 0) > 1 and "tokens_per_s" in r]
    step = end.get("step") or (train[-1]["step"] if train else 0)
    wall = end.get("wall_seconds") or (train[-1]["elapsed_s"] if train else None)
    out: dict[str, Any] = {
        "steps": step,
        "training_wall_s": wall,
        "stopped": end.get("stopped"),
        "precision": end.get("precision"),
        "tokens_per_s_median": statistics.median(rates) if rates else None,
        "tokens_per_s_last": rates[-1] if rates else None,
        "validations": [
            {k: e[k] for k in ("step", "val_bleu", "val_loss", "validation_s") if k in e}
            for e in evals
        ],
        "validation_s_total": round(sum(e.get("validation_s", 0.0) for e in evals), 2),
        "best": {"metric": end.get("select"), "value": end.get("best")} if end else None,
        "averaged": (
            {
                k: average[k]
                for k in ("steps", "val_bleu", "is_best", "note", "skipped")
                if k in average
            }
            if average
            else None
        ),
    }
    if wall is not None:  # the log's elapsed time counts validation; this is the steps alone
        out["training_without_validation_s"] = round(wall - out["validation_s_total"], 2)
    if planned_steps and step and wall:
        # the steps after the first logged one (start-up excluded), validations included
        first, last = (train[1], train[-1]) if len(train) > 2 else ({}, {})
        span = last.get("step", 0) - first.get("step", 0)
        per_step = (last["elapsed_s"] - first["elapsed_s"]) / span if span > 0 else wall / step
        out["planned_steps"] = planned_steps
        out["finished_recipe"] = step >= planned_steps
        out["seconds_per_step"] = round(per_step, 4)
        out["projected_full_training_s"] = round(wall + max(planned_steps - step, 0) * per_step, 1)
    with contextlib.suppress(OSError, ValueError):
        run = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
        out["run_json"] = {k: run.get(k) for k in ("precision", "device", "machine") if k in run}
    return out


def cli_has(command: str, flag: str) -> bool:
    """Whether ``seqlab COMMAND`` takes ``flag`` (the CLI of this working tree)."""
    try:
        from seqlab.cli import build_parser

        parser = build_parser()
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        return flag in sub.choices[command]._option_string_actions
    except Exception:  # noqa: BLE001 - unknown: without the flag
        return False


def evaluate_test(ctx: Context, run_dir: Path, timeout: float) -> dict[str, Any]:
    """``seqlab evaluate --run DIR --split test --json``, with ``--device`` where the CLI has it."""
    device = ["--device", ctx.device.type] if cli_has("evaluate", "--device") else []
    log = ctx.logs / "multi30k_tiny-evaluate-test.log"
    ran = run_logged(
        ctx.seqlab("evaluate", "--run", str(run_dir), "--split", "test", "--json", *device),
        log,
        ctx.limit(timeout),
    )
    found = last_json_line(log) or {}
    ran["device_flag"] = bool(device)
    ran["note"] = None if device else "this CLI has no --device: evaluated where it defaults (CPU)"
    ran["test_bleu"] = found.get("bleu")
    ran["scores"] = {k: v for k, v in found.items() if isinstance(v, int | float)}
    return ran


def section_multi30k_tiny(ctx: Context, deadline: float) -> dict[str, Any]:
    from seqlab.config import load_config

    planned = load_config(TINY).train.max_steps
    overhead = 25 if ctx.dry else ctx.args.run_overhead  # start, tokenizer, final checks
    test_s = 20 if ctx.dry else 35
    train_s = deadline - now() - overhead - test_s
    if train_s < 30 and not ctx.dry:
        raise RuntimeError(f"only {train_s:.0f} s left for training")
    run = train_tiny(ctx, "multi30k_tiny", [], train_s, deadline - now() - test_s)
    run_dir = Path(run["run_dir"])
    out: dict[str, Any] = {"train": run, **summarize_run(run_dir, planned)}
    out["train_max_minutes"] = round(train_s / 60, 2)
    if has_checkpoint(run_dir):
        ctx.shared["run"] = run_dir
        left = deadline - now()
        out["evaluate_test"] = (
            evaluate_test(ctx, run_dir, max(left, test_s))
            if left > 10
            else {"skipped": f"{left:.0f} s left"}
        )
        out["test_bleu"] = out["evaluate_test"].get("test_bleu")
    best = out.get("best") or {}
    out["best_val_bleu"] = best.get("value") if best.get("metric") == "val_bleu" else None
    stopped = out.get("stopped") or ("interrupted at the timeout" if run["timed_out"] else "?")
    if out.get("finished_recipe"):
        verdict = f"the full recipe finished: {out['steps']} steps ({stopped})"
    elif "max_minutes" in stopped or run["timed_out"]:
        verdict = f"cut by the budget at step {out['steps']} of {planned} ({stopped})"
    else:
        verdict = f"stopped at step {out['steps']} of {planned}: {stopped}"
    if out.get("projected_full_training_s") and not out.get("finished_recipe"):
        verdict += (
            f"; all {planned} steps projected at {out['projected_full_training_s']:.0f} s "
            "(validation every 400 steps included)"
        )
    if ctx.dry:
        verdict += " (dry run: a few steps on a slice of the data)"
    out["verdict"] = verdict
    return out


# ------------------------------------------------------------------------------ c. decoding
def translator(run_dir: Path, precision: str, device: torch.device) -> Any:
    """``seqlab.load(run, precision=..., device=...)`` (older seqlab: loaded, then moved)."""
    import seqlab

    # "best" is there once the run has validated; a run stopped before: its latest checkpoint
    from seqlab.storage.checkpoints import pointer

    which = "best" if pointer(run_dir, "best") is not None else "latest"
    try:
        return seqlab.load(run_dir, which, precision=precision, device=device.type)
    except TypeError:  # a seqlab.load without device=
        tr = seqlab.load(run_dir, which, precision=precision)
        if hasattr(tr, "to"):
            return tr.to(device)
        tr.model.to(device)
        return tr


def best_of(fn: Callable[[list[str]], Any], sources: list[str], repeats: int) -> tuple[float, Any]:
    fn(sources[:128])  # warm-up: kernels, allocator, CTranslate2's first batch
    best, found = math.inf, None
    for _ in range(repeats):
        start = now()
        found = fn(sources)
        best = min(best, now() - start)
    return best, found


def probe_ct2_cuda(ctx: Context, model_dir: Path) -> dict[str, Any]:
    """Whether CTranslate2 decodes on CUDA here, asked of a fresh process (a missing CUDA library
    may abort the process that loads it)."""
    from seqlab.export.ctranslate2 import token_name
    from seqlab.tokens import EOS

    code = (
        "import json, sys, torch, ctranslate2\n"
        "torch.ones(8, 8, device='cuda') @ torch.ones(8, 8, device='cuda')  # PyTorch's cuBLAS\n"
        "out = {'version': ctranslate2.__version__,\n"
        "       'cuda_devices': ctranslate2.get_cuda_device_count(),\n"
        "       'compute_types': sorted(ctranslate2.get_supported_compute_types('cuda'))}\n"
        "t = ctranslate2.Translator(sys.argv[1], device='cuda', compute_type='float32')\n"
        "t.translate_batch([json.loads(sys.argv[2])], max_decoding_length=3)\n"
        "print(json.dumps(out))\n"
    )
    log = ctx.logs / "ct2-cuda-probe.log"
    source = json.dumps([token_name(5), token_name(EOS)])
    ran = run_logged(
        [sys.executable, "-c", code, str(model_dir), source], log, ctx.limit(90, 5), grace=5
    )
    found = last_json_line(log)
    ok = ran["rc"] == 0 and found is not None
    return {
        **ran,
        **(found or {}),
        "ok": ok,
        "error": None if ok else tail(log.with_suffix(".err"), 2000),
    }


def ct2_on_cpu(
    ctx: Context,
    run_dir: Path,
    beam: int,
    quantize: str | None,
    sources: list[str],
    references: list[str],
    repeats: int,
    deadline: float,
) -> dict[str, Any]:
    """CTranslate2 on the CPU, measured as ``benchmarks/translation_decoding.py`` measures it:
    its warm worker in a fresh process (CTranslate2 given the cores before any PyTorch work:
    in a process where PyTorch's thread pool has run, its threads slow several-fold), a warm-up
    pass, the best of ``repeats``; every core, ``W`` batches decoded at once."""
    from seqlab.runtime.machine import cpu_count
    from seqlab.tasks.translation import score_translations

    threads = cpu_count()
    workers = max(1, min(8, threads // 2))
    flags = ["--engine", "ctranslate2", "--beam", str(beam), "--threads", str(threads)]
    flags += ["--workers", str(workers), *(["--quantize", quantize] if quantize else [])]
    source_file = ctx.workdir / "val-sources.txt"
    source_file.write_text("\n".join(sources) + "\n", encoding="utf-8")
    spec = {"run": str(run_dir), "flags": flags, "input": str(source_file), "repeats": repeats}
    worker = Path(__file__).with_name("translation_decoding.py")
    log = ctx.logs / f"ct2-cpu-{quantize or 'float32'}-beam{beam}.log"
    ran = run_logged(
        [sys.executable, str(worker), "--warm", json.dumps(spec)], log, ctx.limit(deadline - now())
    )
    found = last_json_line(log)
    if ran["rc"] or not found:
        raise RuntimeError(f"rc {ran['rc']}: {tail(log.with_suffix('.err'), 1500)}")
    result = {
        "seconds": found["seconds"],
        "sentences_per_s": len(sources) / found["seconds"],
        "bleu": float(score_translations(found["outputs"], references)["bleu"]),
        "layout": f"{workers} worker(s) x {threads // workers} thread(s)",
        "command": ran["command"][:300],
    }
    print(
        f"  decoding {'ct2 cpu ' + (quantize or 'float32'):28s} beam {beam}: "
        f"{result['sentences_per_s']:8.1f} sentences/s, BLEU {result['bleu']:.2f}",
        flush=True,
    )
    return result


def section_decoding(ctx: Context, deadline: float) -> dict[str, Any]:
    from seqlab.tasks.translation import load_pairs, score_translations

    device, dry = ctx.device, ctx.dry
    out: dict[str, Any] = {}
    run_dir = ctx.shared.get("run")
    if run_dir is None:
        ran = train_tiny(
            ctx, "decoding_run", ["train.max_steps=300"], 45, min(110, deadline - now() - 30)
        )
        out["trained_here"] = ran
        if not has_checkpoint(Path(ran["run_dir"])):
            raise RuntimeError(
                f"training a run to decode failed: {tail(Path(ran['log']).with_suffix('.err'), 1500)}"
            )
        run_dir = Path(ran["run_dir"])
    out["run"] = str(run_dir)
    out.update({k: v for k, v in summarize_run(run_dir, None).items() if k in ("steps", "best")})
    tr = translator(run_dir, "fp32", device)
    pairs = load_pairs(tr.cfg)["val"]
    pairs = pairs[:48] if dry else pairs
    sources, references = [s for s, _ in pairs], [t for _, t in pairs]
    out["sentences"] = len(sources)
    out["batch_size"] = 128
    repeats = 1 if dry else 2
    searches = {"greedy": 1, "beam5": 5}

    def measure(label: str, tr: Any, beam: int, **engine: Any) -> dict[str, Any]:
        def decode(texts: list[str]) -> Any:
            return tr.hypotheses(texts, beam=beam, batch_size=128, **engine)

        seconds, found = best_of(decode, sources, repeats)
        outputs = [tr.detokenize(h[0].tokens) for h in found]
        result = {
            "seconds": seconds,
            "sentences_per_s": len(sources) / seconds,
            "bleu": float(score_translations(outputs, references)["bleu"]),
        }
        print(
            f"  decoding {label:28s} beam {beam}: {result['sentences_per_s']:8.1f} sentences/s, BLEU {result['bleu']:.2f}",
            flush=True,
        )
        return result

    results: dict[str, dict[str, Any]] = {s: {} for s in searches}
    for precision in ("fp32", "bf16"):
        if now() > deadline - 10:
            out["cut"] = "the section's time ran out"
            break
        tr_p = translator(run_dir, precision, device)
        for search, beam in searches.items():
            results[search][f"seqlab-{precision}"] = measure(f"seqlab {precision}", tr_p, beam)
        del tr_p

    # CTranslate2, on the run's export (RUN/exports/, written once)
    try:
        from seqlab.export.ctranslate2 import require_ctranslate2

        ct2 = require_ctranslate2()
        search_ct2 = tr.engine("ctranslate2")  # exports the checkpoint; a CPU engine, float32
        model_dir = Path(search_ct2.engine.model_dir)
    except Exception as exc:  # noqa: BLE001 - recorded
        out["ctranslate2_error"] = f"{type(exc).__name__}: {exc}"
        ct2 = None
    if ct2 is not None:
        probe = probe_ct2_cuda(ctx, model_dir) if device.type == "cuda" else {
            "ok": False, "error": "no CUDA device (dry run)",
        }  # fmt: skip
        out["ctranslate2_cuda_probe"] = probe
        if probe["ok"]:
            out["ctranslate2_device"] = "cuda"
            wanted = ["float32", "float16", "bfloat16"]
            types = [t for t in wanted if t in probe.get("compute_types", wanted)]
        else:
            out["ctranslate2_device"] = (
                "cpu, in a fresh process per measurement (CTranslate2 could not run on CUDA "
                "here: see ctranslate2_cuda_probe); not the GPU comparison the goal asks for"
            )
            types = ["float32", "int8"]
        on_gpu = None  # the compute type of the GPU translator in seqlab's engine
        for compute_type in types:
            if now() > deadline - 10:
                out["cut"] = "the section's time ran out"
                break
            label = f"ct2-{'cuda' if probe['ok'] else 'cpu'}-{compute_type}"
            for search, beam in searches.items():
                try:
                    if probe["ok"]:
                        # seqlab's engine object, its translator on the GPU (seqlab's CTranslate2
                        # engine opens CPU translators only): the same batches and conventions
                        if on_gpu != compute_type:
                            search_ct2.engine.translator = ct2.Translator(
                                str(model_dir), device="cuda", compute_type=compute_type
                            )
                            search_ct2.engine.compute_type = on_gpu = compute_type
                        results[search][label] = measure(label, tr, beam, engine="ctranslate2")
                    else:
                        quantize = None if compute_type == "float32" else compute_type
                        results[search][label] = ct2_on_cpu(
                            ctx, run_dir, beam, quantize, sources, references, repeats, deadline
                        )
                except Exception as exc:  # noqa: BLE001 - recorded, the others go on
                    results[search][label] = {"error": f"{type(exc).__name__}: {exc}"}
    out["results"] = results
    goal = GOALS["decoding_ratio_vs_ctranslate2"]
    ratios = {}
    for search, by in results.items():
        rate = {k: v["sentences_per_s"] for k, v in by.items() if "sentences_per_s" in v}
        ours = {k: v for k, v in rate.items() if k.startswith("seqlab")}
        theirs = {k: v for k, v in rate.items() if k.startswith("ct2")}
        if ours and theirs:
            a, b = max(ours, key=ours.get), max(theirs, key=theirs.get)  # type: ignore[arg-type]
            f32 = next((k for k in theirs if k.endswith("float32")), None)
            ratios[search] = {
                "seqlab_best": a,
                "ctranslate2_best": b,
                "ratio_best_vs_best": ours[a] / theirs[b],
                "ratio_best_vs_ct2_float32": ours[a] / theirs[f32] if f32 else None,
                "goal": goal,
                "goal_met": ours[a] / theirs[b] >= goal,
                "ctranslate2_on": "cuda" if b.startswith("ct2-cuda") else "cpu",
            }
    out["ratios"] = ratios
    return out


# -------------------------------------------------------------------------------- d. epochs
def dataset_present(name: str) -> str | None:
    """None when ``name``'s files are here (SEQLAB_DATA_DIR or the cache), else why not."""
    try:
        if name == "fsdd":
            from seqlab.data.audio_datasets import fsdd_recordings

            fsdd_recordings(download=False)
            return None
        from seqlab.data import registry

        missing = [f for f, where in registry.status(name) if where is None]
        return f"{name}: missing {', '.join(missing)}" if missing else None
    except Exception as exc:  # noqa: BLE001 - the reason is what is recorded
        return f"{name}: {str(exc).splitlines()[0]}"


def section_epochs(ctx: Context, deadline: float) -> dict[str, Any]:
    recipes = {
        "fsdd-cnn": (
            "fsdd",
            ["train.epochs=1"],
            ["train.epochs=1", "data.num_examples=64"],
            "one epoch",
        ),
        "shakespeare-char-transformer": (
            "tinyshakespeare",
            ["train.epochs=1", "train.max_steps=null"],
            ["train.max_steps=5"],
            "one epoch",
        ),
    }
    out: dict[str, Any] = {}
    for config, (dataset, overrides, dry_overrides, what) in recipes.items():
        missing = dataset_present(dataset)
        left = deadline - now()
        if missing:
            out[config] = {"skipped": f"dataset absent: {missing}"}
            continue
        if left < 15:
            out[config] = {"skipped": f"{left:.0f} s left of the section's budget"}
            continue
        args = [ctx.device_override, *(dry_overrides if ctx.dry else overrides)]
        if ctx.dry and config.startswith("shakespeare"):
            what = "5 steps (dry run)"
        run_dir = ctx.fresh(f"epoch-{config}")
        ran = run_logged(
            ctx.seqlab("train", config, *args, "--out", str(run_dir)),
            ctx.logs / f"epoch-{config}.log",
            ctx.limit(left),
        )
        ran["measured"] = what
        ran["overrides"] = args
        ran.update(summarize_run(run_dir, None))
        ran["ok"] = ran["rc"] == 0 and not ran["timed_out"]
        if not ran["ok"]:
            ran["error"] = tail(Path(ran["log"]).with_suffix(".err"), 1500)
        out[config] = ran
    return out


SECTIONS: dict[str, Callable[[Context, float], dict[str, Any]]] = {
    "tests": section_tests,
    "training_throughput": section_training_throughput,
    "multi30k_tiny": section_multi30k_tiny,
    "decoding": section_decoding,
    "epochs": section_epochs,
}


# ------------------------------------------------------------------------------------ main
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the JSON written")
    parser.add_argument("--budget", type=float, default=420.0, help="seconds for all sections")
    parser.add_argument("--sections", default=",".join(ORDER), help="comma-separated subset")
    parser.add_argument("--dry-run", action="store_true", help="tiny sizes on the CPU")
    parser.add_argument("--workdir", type=Path, help="runs and logs (default: a new temp folder)")
    parser.add_argument(
        "--steps", type=int, default=100, help="training_throughput: measured steps"
    )
    parser.add_argument(
        "--warmup-steps", type=int, default=10, help="training_throughput: unmeasured"
    )
    parser.add_argument(
        "--test-workers", type=int, default=8, help="tests: pytest -n N (xdist); 0: one process"
    )
    parser.add_argument(
        "--run-overhead",
        type=float,
        default=45.0,
        help="multi30k_tiny: seconds of a run besides training (start, tokenizer, final checks)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    clock = Clock(args.budget)
    if not cuda() and not args.dry_run:
        print("no CUDA device: a dry run on the CPU", flush=True)
        args.dry_run = True
    if args.dry_run and args.out.resolve() == DEFAULT_OUT.resolve():
        args.out = Path(tempfile.mkdtemp(prefix="seqlab-gpu-dry-")) / "gpu.json"
    device = torch.device("cuda" if cuda() and not args.dry_run else "cpu")
    chosen = [s.strip() for s in args.sections.split(",") if s.strip() and s.strip() != "memory"]
    unknown = [s for s in chosen if s not in SECTIONS]
    if unknown:
        raise SystemExit(f"unknown sections {unknown}; known: {', '.join(ORDER)}")
    ctx = Context(args, device, clock)
    result: dict[str, Any] = {
        "script": "benchmarks/gpu.py",
        "dry_run": args.dry_run,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "budget_s": args.budget,
        "workdir": str(ctx.workdir),
        "device": device_info(device),
        "goals": GOALS,
        "sections": {},
        "memory": {},
    }
    print(f"device: {result['device'].get('name', 'cpu')}, writing {args.out}", flush=True)
    write_json(args.out, result)
    todo = [s for s in ORDER if s in chosen]
    for i, name in enumerate(todo):
        left = clock.left()
        later = sum(RESERVE[s] for s in todo[i + 1 :])
        allot = min(left - later, CAP.get(name, math.inf))
        if allot < NEEDS[name]:
            allot = min(left, CAP.get(name, math.inf))  # the later ones get less
        entry: dict[str, Any]
        if allot < NEEDS[name]:
            entry = {
                "status": "skipped",
                "reason": f"{left:.1f} s of the budget left, it needs {NEEDS[name]} s",
            }
        else:
            print(f"== {name} ({allot:.0f} s of {left:.0f} s left)", flush=True)
            if device.type == "cuda":
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats(device)
            start = now()
            # sampled only while subprocesses compute: a thread polling the device inside a
            # timed loop of this process would share its GIL and CUDA context with the loop
            with DeviceMemory(enabled=name not in IN_PROCESS) as memory:
                try:
                    entry = {"status": "ok", **SECTIONS[name](ctx, now() + allot)}
                except Exception as exc:  # noqa: BLE001 - recorded; the next section runs
                    entry = {
                        "status": "failed",
                        "error": f"{type(exc).__name__}: {exc}",
                        "traceback": traceback.format_exc()[-4000:],
                    }
            entry["seconds"] = round(now() - start, 2)
            entry["allotted_s"] = round(allot, 1)
            if device.type == "cuda":
                entry["memory"] = {
                    "max_memory_allocated_bytes": torch.cuda.max_memory_allocated(device),
                    "device_used_peak_bytes": memory.peak,
                    "device_used_at_start_bytes": memory.baseline,
                    "note": "max_memory_allocated: this process's tensors; device_used: every "
                    "process (subprocesses too) and CUDA contexts, sampled every 0.25 s",
                }
                result["memory"][name] = entry["memory"]
            else:
                result["memory"][name] = None
        result["sections"][name] = entry
        result["elapsed_s"] = round(clock.used(), 2)
        write_json(args.out, result)
        print(
            f"   {name}: {entry['status']} in {entry.get('seconds', 0):.1f} s"
            + (
                f" ({entry.get('reason') or entry.get('error')})" if entry["status"] != "ok" else ""
            ),
            flush=True,
        )
    report(result)
    print(f"wrote {args.out} ({clock.used():.0f} s of {args.budget:.0f})", flush=True)
    return result


def report(result: dict[str, Any]) -> None:
    s = result["sections"]
    t = s.get("tests", {})
    if t.get("status") == "ok":
        print(
            f"tests: {t['summary']}"
            + (f"; failures: {', '.join(t['failures'][:10])}" if t["failures"] else "")
        )
    tr = s.get("training_throughput", {})
    if tr.get("status") == "ok":
        rate = tr["target_tokens_per_s"]
        print(
            f"training: seqlab {rate['seqlab']:,.0f} vs nn.Transformer {rate['nn_transformer']:,.0f} target tokens/s = "
            f"{tr['ratio']:.2f}x (goal >= {tr['goal_ratio']}); "
            f"{tr['share_of_measured_peak']['seqlab']:.1%} of the measured mm peak"
            + (
                f", {tr['share_of_nominal_peak']['seqlab']:.1%} of the nominal"
                if tr["share_of_nominal_peak"]
                else ""
            )
        )
    m = s.get("multi30k_tiny", {})
    if m.get("status") == "ok":
        print(
            f"multi30k tiny: {m.get('verdict')}; {m.get('steps')} steps in {m.get('training_wall_s')} s, "
            f"{m.get('tokens_per_s_median') or 0:,.0f} tok/s, best val BLEU {m.get('best_val_bleu')}, test BLEU {m.get('test_bleu')}"
        )
    d = s.get("decoding", {})
    if d.get("status") == "ok":
        for search, r in d.get("ratios", {}).items():
            print(
                f"decoding {search}: {r['seqlab_best']} / {r['ctranslate2_best']} = {r['ratio_best_vs_best']:.2f}x (goal >= {r['goal']})"
            )
    e = s.get("epochs", {})
    if e.get("status") == "ok":
        for config, r in e.items():
            if isinstance(r, dict) and ("wall_s" in r or "skipped" in r):
                print(
                    f"epoch {config}: "
                    + (
                        r["skipped"]
                        if "skipped" in r
                        else f"{r['measured']} in {r['wall_s']} s wall (training {r.get('training_wall_s')} s), rc {r['rc']}"
                    )
                )


if __name__ == "__main__":
    main()
