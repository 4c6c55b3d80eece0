"""What a demo prints for a learner: one sentence per result, with its numbers rounded for reading
(:func:`num`), the claim it tests and whether it held (:func:`claim`), where its files are
(:func:`files_line`) and the precision and CPU the numbers came from (:func:`numbers_line`). The
full-precision numbers stay in the demo's JSON under ``--out`` (and in ``--json``, where a command
has it).

**Diverged** (:func:`diverged`), the one rule every demo applies to a language model's loss (mean
cross-entropy in nats/token): the loss diverged when it is not finite, or when it is above
:data:`DIVERGED_FACTOR` times the loss of the uniform model, log |V| (d2l.ai §9.3.2: the uniform
model has perplexity |V|). A model that far above the uniform guess is worse than knowing nothing
about the text, by a factor |V| in perplexity: its loss is printed as "diverged", never as a number
(an exp of it, the perplexity, can pass 10^40 or overflow).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

#: a loss above DIVERGED_FACTOR × log |V| (the uniform model's) diverged; see the module docstring
DIVERGED_FACTOR = 2.0


def num(value: float | None, digits: int = 3) -> str:
    """``value`` rounded to ``digits`` significant digits, for reading: 1.77, 0.476, 1013, 2.3e-8.

    Integers of up to six digits are shown whole (1013, not 1.01e3); values below 0.001 or from
    a million on in scientific notation; None as "n/a", non-finite values as "inf" / "nan".
    """
    if value is None:
        return "n/a"
    value = float(value)
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if value == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(value)))
    if magnitude >= 6 or magnitude < -3:
        mantissa, exponent = f"{value:.{digits - 1}e}".split("e")
        return f"{mantissa}e{int(exponent)}"
    return f"{value:.{max(digits - 1 - magnitude, 0)}f}"


def percent(fraction: float) -> str:
    """A fraction as a percentage with one decimal: 0.6934 -> "69.3%"."""
    return f"{100 * fraction:.1f}%"


def uniform_loss(vocab_size: int) -> float:
    """The loss of the uniform model over ``vocab_size`` tokens: log |V| nats/token."""
    return math.log(vocab_size)


def diverged(loss: float | None, vocab_size: int) -> bool:
    """Whether a language model's loss diverged (the module docstring's rule): not finite, or
    above :data:`DIVERGED_FACTOR` × log |V|."""
    return (
        loss is None or not math.isfinite(loss) or loss > DIVERGED_FACTOR * uniform_loss(vocab_size)
    )


def loss_text(loss: float | None, vocab_size: int) -> str:
    """A loss for a sentence: rounded, or "diverged" (:func:`diverged`)."""
    return "diverged" if diverged(loss, vocab_size) else num(loss)


def diverged_rule(vocab_size: int) -> str:
    """The rule in words, with its threshold for this vocabulary."""
    threshold = DIVERGED_FACTOR * uniform_loss(vocab_size)
    return (
        f"loss above {num(threshold)} = {DIVERGED_FACTOR:g} × the uniform model's "
        f"log |V| = {num(uniform_loss(vocab_size))}, or not finite"
    )


def first_diverged_step(records: Iterable[dict[str, Any]], vocab_size: int) -> int | None:
    """The first logged training step whose loss diverged (``metrics.jsonl`` records), or None."""
    for record in records:
        is_train = record.get("kind") == "train" and "loss" in record
        if is_train and diverged(record["loss"], vocab_size):
            return int(record["step"])
    return None


def claim(text: str, held: bool, evidence: str) -> str:
    """One sentence: the claim, whether it held, the numbers that say so."""
    return f"{text}: {'holds' if held else 'does not hold'} ({evidence})"


def files_line(figures: Sequence[str | Path] = (), numbers: str | Path | None = None) -> str:
    """Where the files are: "figures: a.png, b.png; numbers: r.json", leaving out what is
    absent (never an empty "figures: ;")."""
    parts = []
    if figures:
        parts.append("figures: " + ", ".join(map(str, figures)))
    if numbers is not None:
        parts.append(f"numbers: {numbers}")
    return "; ".join(parts) or "no files written"


def cpu_kind(isa: dict[str, bool], capability: str = "") -> str:
    """The instruction set that decides matrix-product speed and bf16 support: AMX, AVX-512 with
    bf16, AVX-512, AVX2 (else PyTorch's CPU capability)."""
    if isa.get("amx"):
        return "AMX"
    if isa.get("avx512_bf16"):
        return "AVX-512 with bf16"
    if isa.get("avx512f"):
        return "AVX-512"
    if isa.get("avx2"):
        return "AVX2"
    return capability or "unknown"


def numbers_line(precision: str, machine: dict[str, Any] | None = None) -> str:
    """One line naming the precision and the CPU the numbers came from: ``machine`` is a
    :func:`seqlab.runtime.machine.machine` record (a run's ``run.json`` holds one), this machine's when
    None."""
    if machine is None:
        from seqlab.runtime.machine import machine as this_machine  # deferred: torch

        machine = this_machine(precision)
    kind = cpu_kind(machine.get("isa", {}), machine.get("torch_cpu_capability", ""))
    threads = machine.get("threads")
    return (
        f"numbers from: {precision}, {kind} CPU ({machine.get('cpu', 'unknown')}), "
        f"{threads} thread{'s' if threads != 1 else ''}, PyTorch {machine.get('torch', '?')}"
    )


def run_precision(run_dirs: Iterable[str | Path]) -> tuple[str, dict[str, Any] | None]:
    """The training and evaluation precision that ``run_dirs`` recorded (their ``run.json``), in
    words ("bf16 training (auto), fp32 evaluation"), and the machine of the first of them."""
    from seqlab.storage.rundir import RunDir  # deferred: torch (its checkpoints)

    texts: list[str] = []
    machine = None
    for run_dir in run_dirs:
        marker = RunDir(run_dir).read_marker() or {}
        precision = marker.get("precision", {})
        train = precision.get("train", "unrecorded")
        auto = " (auto)" if str(precision.get("train_reason", "")).startswith("auto") else ""
        text = f"{train} training{auto}, {precision.get('eval', 'fp32')} evaluation"
        if text not in texts:
            texts.append(text)
        machine = machine or marker.get("machine")
    return "; ".join(texts) or "unrecorded precision", machine
