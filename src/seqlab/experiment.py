"""Train an experiment into a run directory, or continue one: the pipeline behind ``seqlab train``.

Order matters, so that a mistake never costs the user anything: everything is checked and loaded
first (the config, the run directory, the data, the checkpoint to resume), and files are written
last. A new run goes only into a new or empty directory, or one that holds a seqlab run (marked by
``run.json``) that never saved a checkpoint; a resumed run accepts only the overrides it can
honour (:data:`RESUMABLE`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch

from seqlab.config import ExperimentConfig, load_config, save_config
from seqlab.errors import ConfigError
from seqlab.io import atomic_write_json
from seqlab.tasks import artefacts, build_experiment
from seqlab.training import checkpoint as ckpt
from seqlab.training import distributed as dist
from seqlab.training.callbacks import CurvePlot, MetricsLog, ProgressBar
from seqlab.training.trainer import Callback, Trainer

#: overrides allowed with ``--resume``: budgets, bookkeeping, the learning rate (applied from the
#: next step on, the schedule's shape kept) and decoding. Anything else would not take effect or
#: would not match the checkpoint.
RESUMABLE = (
    "train.epochs",
    "train.max_steps",
    "train.max_minutes",
    "train.lr",
    "train.log_every",
    "train.eval_every",
    "train.keep_last",
    "train.early_stopping_patience",
    "train.average_last",
    "train.threads",
    "decode.*",
)
RUN_FILES = {"run.json", "config.yaml", "metrics.jsonl", "curves.png", "checkpoints", "exports"}
MARKER = {"format": "seqlab.run/1"}


def is_run_dir(path: Path) -> bool:
    """Whether ``path`` was created by ``seqlab train`` (it holds the ``run.json`` marker)."""
    try:
        return json.loads((path / "run.json").read_text(encoding="utf-8")) == MARKER
    except (OSError, ValueError):
        return False


def check_new_run_dir(run_dir: Path) -> None:
    """Refuse a directory that holds anything but a seqlab run without checkpoints."""
    if run_dir.exists() and not run_dir.is_dir():
        raise ConfigError(f"--out {run_dir} exists and is not a directory")
    if ckpt.list_steps(run_dir):
        raise ConfigError(
            f"{run_dir} already holds checkpoints; pass --resume {run_dir} to continue it, "
            "or choose another --out"
        )
    if run_dir.is_dir():
        entries = sorted(p.name for p in run_dir.iterdir())
        foreign = [n for n in entries if n not in RUN_FILES | artefacts()]
        if entries and (foreign or not is_run_dir(run_dir)):
            shown = ", ".join((foreign or entries)[:5]) + (", ..." if len(entries) > 5 else "")
            raise ConfigError(
                f"--out {run_dir} is not empty and not a seqlab run ({shown}); choose a new or "
                "empty directory (nothing was written)"
            )
    probe = run_dir
    while not probe.exists():
        probe = probe.parent
    if not os.access(probe, os.W_OK | os.X_OK):
        raise ConfigError(f"--out {run_dir}: cannot write into {probe}")


def resume_config(run_dir: Path, overrides: list[str]) -> ExperimentConfig:
    """The run's own config with the overrides a resumed run can honour."""
    if not (run_dir / "config.yaml").is_file():
        raise ConfigError(
            f"--resume {run_dir}: no config.yaml there; is it a seqlab run directory?"
        )
    for item in overrides:
        key = item.split("=", 1)[0].strip()
        if key not in RESUMABLE and not (key.startswith("decode.") and "decode.*" in RESUMABLE):
            raise ConfigError(
                f"--resume cannot change {key}: the checkpoint was trained with the run's own "
                f"value; allowed on resume: {', '.join(RESUMABLE)}"
            )
    return load_config(run_dir / "config.yaml", overrides)


def train(
    cfg: ExperimentConfig | None,
    run_dir: str | Path,
    resume: bool = False,
    overrides: list[str] | None = None,
    callbacks: list[Callback] | None = None,
) -> dict[str, Any]:
    """Train ``cfg`` into ``run_dir``, or continue the run there when ``resume``."""
    run_dir = Path(run_dir)
    if resume:
        cfg = resume_config(run_dir, overrides or [])
    elif cfg is None:
        raise ConfigError("a new run needs a config")
    else:
        check_new_run_dir(run_dir)
    if cfg.train.threads:
        torch.set_num_threads(cfg.train.threads)
    exp = build_experiment(cfg, run_dir if resume else None)
    metrics = run_dir / "metrics.jsonl"
    trainer = Trainer(
        exp.model,
        exp.loss_fn,
        exp.train_batches,
        cfg.train,
        run_dir,
        evaluate=exp.evaluate,
        select=exp.select,
        callbacks=[
            ProgressBar(unit=exp.unit, perplexity=exp.perplexity),
            MetricsLog(metrics, unit=exp.unit, perplexity=exp.perplexity),
            CurvePlot(metrics, run_dir / "curves.png", perplexity=exp.perplexity),
            *(callbacks or []),
        ],
        extra_meta={"arch": cfg.model.arch, **exp.meta},
        eval_precision=cfg.decode.precision,
    )
    try:
        if resume:
            trainer.restore(ckpt.find_checkpoint(run_dir, "latest"))
        if dist.is_main():  # everything is loaded: now write
            run_dir.mkdir(parents=True, exist_ok=True)
            atomic_write_json(run_dir / "run.json", MARKER)
            save_config(cfg, run_dir / "config.yaml")
            if not resume:
                exp.save_artefacts(run_dir)
        dist.barrier()
        summary = trainer.fit()
        if cfg.train.average_last > 1:
            summary["averaged"] = trainer.average_last(cfg.train.average_last)
    finally:
        dist.teardown()
    return summary
