"""Run an experiment from its config: build, train, reload. The command line calls these.

An experiment object (:class:`seqlab.language_modeling.LMExperiment` or
:class:`seqlab.translation.TranslationExperiment`) bundles what the trainer needs: ``model``,
``train_batches``, ``loss_fn``, ``evaluate``, ``select`` (the metric choosing the best
checkpoint), ``save_artefacts`` (vocabularies, tokenizers) and ``extra_meta``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from seqlab.config import ExperimentConfig, load_config, save_config
from seqlab.errors import ConfigError
from seqlab.tasks.language_modeling import LM_ARCHS, build_lm_experiment
from seqlab.training import checkpoint as ckpt
from seqlab.training import distributed as dist
from seqlab.training.callbacks import CurvePlot, MetricsLog, ProgressBar
from seqlab.training.trainer import Callback, Trainer


def build_experiment(cfg: ExperimentConfig, run_dir: Path | None = None) -> Any:
    """Data, vocabularies and model for ``cfg`` (reusing a run's saved vocabularies if given)."""
    if cfg.model.arch in LM_ARCHS:
        return build_lm_experiment(cfg, run_dir)
    from seqlab.tasks.translation import build_translation_experiment

    return build_translation_experiment(cfg, run_dir)


def _prepare_run_dir(run_dir: Path, resume: bool) -> None:
    if resume:
        if not (run_dir / "config.yaml").exists():
            raise ConfigError(
                f"--resume {run_dir}: no config.yaml there; is it a seqlab run directory?"
            )
        return
    if ckpt.list_steps(run_dir):
        raise ConfigError(
            f"{run_dir} already holds checkpoints; pass --resume {run_dir} to continue it, or choose another --out"
        )


def train(
    cfg: ExperimentConfig | None,
    run_dir: str | Path,
    resume: bool = False,
    overrides: list[str] | None = None,
    callbacks: list[Callback] | None = None,
) -> dict[str, Any]:
    """Train ``cfg`` into ``run_dir`` (or continue the run there when ``resume``)."""
    run_dir = Path(run_dir)
    _prepare_run_dir(run_dir, resume)
    if resume:
        cfg = load_config(run_dir / "config.yaml", overrides or [])
    assert cfg is not None
    if cfg.train.threads:
        torch.set_num_threads(cfg.train.threads)
    exp = build_experiment(cfg, run_dir if resume else None)
    if dist.is_main():
        run_dir.mkdir(parents=True, exist_ok=True)
        save_config(cfg, run_dir / "config.yaml")
        exp.save_artefacts(run_dir)
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
            ProgressBar(),
            MetricsLog(metrics),
            CurvePlot(metrics, run_dir / "curves.png"),
            *(callbacks or []),
        ],
        extra_meta={"arch": cfg.model.arch, **exp.extra_meta()},
    )
    try:
        summary = trainer.fit(resume=resume)
        if cfg.train.average_last > 1 and dist.is_main():
            summary["averaged"] = average_last_checkpoints(
                run_dir, cfg.train.average_last, exp, trainer
            )
    finally:
        dist.teardown()
    return summary


def average_last_checkpoints(run_dir: Path, n: int, exp: Any, trainer: Trainer) -> dict[str, Any]:
    """Average the last ``n`` kept checkpoints into a new one; it becomes best if it scores better."""
    steps = ckpt.list_steps(run_dir)[-n:]
    if len(steps) < 2:
        return {"skipped": f"only {len(steps)} checkpoint(s) kept; raise train.keep_last"}
    state = ckpt.average_checkpoints(
        [ckpt.checkpoint_dir(run_dir) / ckpt.step_name(s) for s in steps]
    )
    exp.model.load_state_dict(state)
    exp.model.eval()
    with torch.no_grad():
        metrics = exp.evaluate(exp.model)
    metric, mode = exp.select
    better = trainer.pos.best is None or (
        metrics[metric] > trainer.pos.best if mode == "max" else metrics[metric] < trainer.pos.best
    )
    if better:
        trainer.pos.best = float(metrics[metric])
        trainer.pos.step += 1  # a new checkpoint name after the last real step
        trainer.save_checkpoint(is_best=True)
    return {"steps": steps, **metrics, "is_best": better}


def load_run(
    run_dir: str | Path, which: str = "best"
) -> tuple[ExperimentConfig, torch.nn.Module, Any, Path]:
    """Config, model (weights loaded, eval mode), experiment, and checkpoint folder of a run."""
    run_dir = Path(run_dir)
    path = ckpt.find_checkpoint(run_dir, which)
    meta = ckpt.read_meta(path)
    cfg = load_config(run_dir / "config.yaml")
    if meta.get("arch") != cfg.model.arch:
        raise ckpt.CheckpointError(
            f"{path}: written for model.arch={meta.get('arch')!r}, but {run_dir / 'config.yaml'} says {cfg.model.arch!r}"
        )
    exp = build_experiment(cfg, run_dir)
    ckpt.load_model_weights(exp.model, path)
    exp.model.eval()
    return cfg, exp.model, exp, path
