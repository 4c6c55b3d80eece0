"""The two halves of a training step that differ between a CPU and a GPU (:mod:`seqlab.training.trainer`).

:class:`Update` applies the optimizer after the gradients are summed and clipped. On a CPU it reads
the gradient norm at once and stops a step whose norm is not finite before the update. On a GPU
(``Update.deferred``) nothing is read: PyTorch's fused optimizer takes the non-finite flag as
a device tensor and skips that update there (``found_inf``, the mechanism of
:class:`torch.amp.GradScaler`), and :class:`LogWindow` sums the step's numbers on the device and
reads them once per log line. fp16 scales the loss (:class:`torch.amp.GradScaler`, Micikevicius
et al. 2018): an overflowed step is skipped while the scale comes down, never a divergence.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from seqlab.config import TrainConfig
from seqlab.nn.losses import perplexity
from seqlab.runtime.precision import Resolved
from seqlab.training.optim import build_optimizer


class Update:
    """The optimizer, its gradient scaler (fp16) and how a step's update is applied.

    Args:
        model: the parameters (already on ``device``).
        world: processes training together (more than one: every step is read, so that all
            agree on stopping).
        reads_on_device: keep the numbers on the device, with a fused optimizer (None: on a GPU).

    """

    #: whether the step's numbers stay on the device until the log line
    deferred: bool = False

    def __init__(
        self,
        model: nn.Module,
        cfg: TrainConfig,
        device: torch.device,
        world: int,
        precision: Resolved,
        reads_on_device: bool | None = None,
    ) -> None:
        on_device = device.type == "cuda" if reads_on_device is None else reads_on_device
        self.optimizer = build_optimizer(model, cfg, fused=on_device or None)
        self.scaler = torch.amp.GradScaler(device.type) if precision.scaled else None
        fused = bool(self.optimizer.defaults.get("fused"))  # it can skip an update on the device
        self.deferred = bool(on_device and world == 1 and fused)
        self.clip = cfg.grad_clip if cfg.grad_clip is not None else math.inf

    def apply(
        self, model: nn.Module, scale: float, mean: float | Tensor, diverged: Callable[[str], None]
    ) -> float | Tensor:
        """Scale the summed gradients by ``scale`` (per token, DDP's averaging undone), clip
        them, update (:meth:`step`); return the norm before clipping, as :meth:`step` does."""
        if self.scaler is not None:
            self.scaler.unscale_(self.optimizer)  # clip and log the true gradient
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        if grads:
            torch._foreach_mul_(grads, scale)
        norm = nn.utils.clip_grad_norm_(model.parameters(), self.clip)
        return self.step(norm, mean, diverged)

    def step(
        self, norm: Tensor, mean: float | Tensor, diverged: Callable[[str], None]
    ) -> float | Tensor:
        """Update the weights with the clipped gradients, whose norm before clipping is
        ``norm`` and whose step's mean loss is ``mean``; return the norm to log (a float, or a
        0-d device tensor when deferred). ``diverged(message)`` stops training."""
        if self.scaler is not None:
            self.scaler.step(self.optimizer)  # skips an update whose gradients overflowed
            self.scaler.update()  # and lowers the scale: an overflow is not a divergence
            norm = torch.nan_to_num(norm.detach(), nan=0.0, posinf=0.0)
            return norm if self.deferred else float(norm)
        if self.deferred:
            # the fused optimizer skips the update on the device when found_inf is 1
            bad = ~(torch.isfinite(norm) & torch.isfinite(torch.as_tensor(mean)))
            self.optimizer.found_inf = bad.float()  # type: ignore[attr-defined]
            try:
                self.optimizer.step()
            finally:
                del self.optimizer.found_inf  # type: ignore[attr-defined]
            return norm.detach()
        value = float(norm)
        if not math.isfinite(value):
            diverged(f"gradient norm became {value}")
        self.optimizer.step()
        return value


@dataclass
class LogWindow:
    """Training loss, tokens and gradient norms since the last log line."""

    # floats, or 0-d tensors on the GPU (summed there, read when the line is written)
    loss_sum: float | Tensor = 0.0
    tokens: float = 0.0
    steps: int = 0
    grad_norm_sum: float | Tensor = 0.0  # before clipping
    clipped: int | Tensor = 0  # steps whose gradient norm exceeded train.grad_clip
    started: float = field(default_factory=time.monotonic)
    first_step: int = 0  # the first step in the window (a deferred divergence names the range)

    def add(
        self, loss: float | Tensor, tokens: float, norm: float | Tensor, clipped: bool | Tensor
    ) -> None:
        self.loss_sum = self.loss_sum + loss * tokens
        self.tokens += tokens
        self.steps += 1
        self.grad_norm_sum = self.grad_norm_sum + norm
        self.clipped = self.clipped + clipped

    def read(self) -> None:
        """Bring the device's sums to the host (one synchronisation per log line)."""
        if isinstance(self.loss_sum, Tensor):
            values = torch.stack(
                [
                    torch.as_tensor(v, device=self.loss_sum.device, dtype=torch.float64)
                    for v in (self.loss_sum, self.grad_norm_sum, self.clipped)
                ]
            ).tolist()
            self.loss_sum, self.grad_norm_sum, self.clipped = values[0], values[1], int(values[2])

    def non_finite(self, step: int) -> tuple[str, str] | None:
        """What became non-finite in the window (read), ending at ``step``, and what that did:
        the arguments of :meth:`~seqlab.training.trainer.Trainer.diverged`; None if nothing."""
        if math.isfinite(self.loss_sum) and math.isfinite(self.grad_norm_sum):
            return None
        what = "loss" if not math.isfinite(self.loss_sum) else "gradient norm"
        return f"the {what} became non-finite", (
            f"in steps {self.first_step}-{step} (read from the device once per "
            "train.log_every steps); training stopped, and the steps with a non-finite loss or "
            "gradient did not update the weights"
        )

    def record(self, step: int, epoch: float, lr: float, elapsed: float, clip: bool) -> dict:
        """The log line (``metrics.jsonl``): token-weighted mean loss, throughput, the mean
        gradient norm before clipping and, with ``clip``, the fraction of steps clipped."""
        mean = self.loss_sum / max(self.tokens, 1.0)
        seconds = max(time.monotonic() - self.started, 1e-9)
        record = {
            "step": step,
            "epoch": epoch,
            "loss": mean,
            "ppl": perplexity(mean),  # meaningful for a per-token cross-entropy only
            "lr": lr,
            "tokens_per_s": self.tokens / seconds,
            "grad_norm": self.grad_norm_sum / max(self.steps, 1),  # mean, before clipping
            "elapsed_s": round(elapsed, 2),
        }
        if clip:
            record["clipped"] = self.clipped / max(self.steps, 1)  # fraction of the steps
        return record
