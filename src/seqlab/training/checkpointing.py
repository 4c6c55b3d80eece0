"""The trainer's validation and checkpoints: validate, keep the best and stop early
(:func:`validate_and_checkpoint`), save the training state (:func:`save_checkpoint`), continue
from it exactly (:func:`restore`), and average the last checkpoints (:func:`average_last`).

Each takes the :class:`~seqlab.training.trainer.Trainer` whose methods of the same names call
it. The checkpoint files themselves are written and read by
:mod:`seqlab.storage.training_state` and :mod:`seqlab.storage.checkpoints`.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from seqlab.errors import SeqlabError
from seqlab.storage import checkpoints as ckpt
from seqlab.storage import training_state
from seqlab.training import distributed as dist
from seqlab.training.divergence import TrainingDiverged, non_finite

if TYPE_CHECKING:
    from seqlab.training.trainer import Trainer


def validate_and_checkpoint(trainer: Trainer) -> None:
    """Evaluate (rank 0), save a checkpoint, and decide on early stopping (all ranks)."""
    pos, select = trainer.pos, trainer.select
    record: dict[str, Any] = {"step": pos.step, "epoch": pos.epoch}
    is_best = trainer.evaluate_fn is None
    bad: list[str] = []
    if dist.is_main() and trainer.evaluate_fn is not None:
        record.update(trainer.evaluate())
        bad = non_finite(record, select.metric)
    if dist.broadcast_flag(bool(bad)):
        # the weights give NaN/inf: never a best or a checkpoint to resume from
        for cb in trainer.callbacks:
            cb.on_eval(trainer, {**record, "best": pos.best})
        trainer.diverged(
            "validation " + ", ".join(f"{k} = {record[k]}" for k in bad),
            f"at step {pos.step} (epoch {pos.epoch}); this checkpoint was not saved",
        )
    if dist.is_main() and trainer.evaluate_fn is not None:
        value = record.get(select.metric)
        if select.better(value, pos.best):
            pos.best, pos.evals_since_best, is_best = float(value), 0, True
        else:
            pos.evals_since_best += 1
        if trainer.plateau is not None and value is not None:
            trainer.plateau.step(float(value))
        record["best"] = pos.best
        record["elapsed_s"] = round(trainer.elapsed(), 2)
        pos.history.append(record)
    is_best = dist.broadcast_flag(is_best)
    patience = trainer.cfg.early_stopping_patience
    early = dist.broadcast_flag(bool(patience) and pos.evals_since_best >= patience)
    if early and not trainer.stop_reason:
        trainer.stop_reason = f"no improvement of {select.metric} in {patience} evaluations"
    trainer.save_checkpoint(is_best)
    if dist.is_main() and trainer.evaluate_fn is not None:
        for cb in trainer.callbacks:  # after the checkpoint: a failing plot loses nothing
            cb.on_eval(trainer, record)


def average_last(trainer: Trainer, n: int) -> dict[str, Any]:
    """Average the last ``n`` trained checkpoints (Vaswani et al. 2017, §6.1; pruning keeps
    them, :attr:`~seqlab.config.TrainConfig.checkpoints_kept`, and a run that saved fewer
    averages those, with a ``note`` in the result); keep the result as a new checkpoint, the
    best one, if it evaluates better than the best so far.

    With ``final_evaluate``, the average and the best checkpoint are both evaluated by it
    and it alone decides (``"final"`` in the result holds both); ``evaluate`` still records
    the average's metrics on the scale of the training history.
    """
    run_dir, select, model = trainer.run_dir, trainer.select, trainer.model
    steps = ckpt.trained_steps(run_dir)[-n:]
    if len(steps) < 2:
        return {
            "skipped": f"only {len(steps)} trained checkpoint(s) saved; validate or save "
            "more often (train.eval_every, train.save_every)"
        }
    fewer = len(steps) < n
    note = f"average of {len(steps)}, not {n}: only {len(steps)} trained checkpoints are there"
    state = ckpt.average(run_dir, steps)
    metrics: dict[str, Any] = {}
    better = False
    if dist.is_main() and trainer.evaluate_fn is not None:
        final: dict[str, Any] = {}
        if trainer.final_evaluate_fn is not None:
            ckpt.load_model_weights(model, ckpt.find(run_dir, "best"))
            final["best"] = trainer.evaluate(trainer.final_evaluate_fn)
        model.load_state_dict(state)
        metrics = trainer.evaluate()
        if final:
            final["average"] = trainer.evaluate(trainer.final_evaluate_fn)
            better = select.better(
                final["average"].get(select.metric), final["best"].get(select.metric)
            )
            metrics["final"] = final
        else:
            better = select.better(metrics.get(select.metric), trainer.pos.best)
    model.load_state_dict(state)  # every rank holds the average (rank 0 looked at best)
    better = dist.broadcast_flag(better)
    if better:
        # the recorded best is the kept checkpoint's value on the history's scale
        trainer.pos.best = float(metrics[select.metric]) if metrics else trainer.pos.best
        trainer.pos.step += 1  # a new checkpoint name after the last real step
        trainer.save_checkpoint(is_best=True, averaged_steps=steps)
    return {"steps": steps, **({"note": note} if fewer else {}), **metrics, "is_best": better}


def save_checkpoint(
    trainer: Trainer, is_best: bool, averaged_steps: list[int] | None = None
) -> None:
    """Save the training state as the checkpoint of the current step; ``averaged_steps``
    marks it as the average of those steps' weights (with the last one's optimizer and data
    position), which a resumed run does not continue from. Weights holding NaN or infinite
    values are never saved (:class:`~seqlab.training.divergence.TrainingDiverged`)."""
    pos = trainer.pos
    if not all(torch.isfinite(p).all() for p in trainer.model.parameters()):
        raise TrainingDiverged(
            f"the weights hold NaN or infinite values at step {pos.step}; not saved"
        )
    state = training_state.TrainingState(
        step=pos.step,
        epoch=pos.epoch,
        batch=pos.batch,
        best=pos.best,
        evals_since_best=pos.evals_since_best,
        history=pos.history,
        schedule=trainer.schedule.state_dict(),
        plateau=trainer.plateau.state_dict() if trainer.plateau else None,
        world_size=trainer.world,
        accumulate=trainer.cfg.accumulate,
        elapsed_s=trainer.elapsed(),
        finished=trainer.stop_reason,
        precision=trainer.precision.precision,
        averaged_steps=averaged_steps,
        extra=trainer.extra_meta,
    )
    training_state.save(
        trainer.run_dir,
        state,
        trainer.model,
        trainer.optimizer,
        trainer.carry,
        is_best=is_best,
        keep_last=trainer.cfg.checkpoints_kept,  # keep_last, or average_last when that is more
        rank=trainer.rank,
        share=dist.same_on_all_ranks,
        barrier=dist.barrier,
    )


def restore(trainer: Trainer, path: Path) -> None:
    """Continue from the checkpoint at ``path`` (same processes, same accumulation): weights,
    optimizer, schedule, carried state, position and the time already spent. A run that has
    finished is refused, naming the ``--resume`` overrides that let it train further
    (:meth:`~seqlab.training.trainer.Trainer.lifted_limits`)."""
    run_dir, cfg = trainer.run_dir, trainer.cfg
    state, carry = training_state.restore(
        path,
        trainer.model,
        trainer.optimizer,
        run_dir=run_dir,
        rank=trainer.rank,
        world_size=trainer.world,
        accumulate=cfg.accumulate,
    )
    trainer.schedule.load_state_dict(state.schedule)
    if trainer.plateau is not None and state.plateau:
        trainer.plateau.load_state_dict(state.plateau)
    trainer.carry = dist.to_device(carry, trainer.device)
    # the time budget (train.max_minutes) counts the time already spent before the restart
    trainer.started = time.monotonic() - state.elapsed_s
    trainer.pos = dataclasses.replace(
        trainer.pos,
        step=state.step,
        epoch=state.epoch,
        batch=state.batch,
        best=state.best,
        evals_since_best=state.evals_since_best,
        history=state.history,
    )
    reason = trainer.budget_reason()
    patience = cfg.early_stopping_patience
    if patience and trainer.pos.evals_since_best >= patience:
        reason = f"no improvement of {trainer.select.metric} in {patience} evaluations"
    if reason:
        raise SeqlabError(
            f"{run_dir} has finished ({reason}); to train further, raise what it has "
            f"reached: seqlab train --resume {run_dir} {' '.join(trainer.lifted_limits())}"
        )
