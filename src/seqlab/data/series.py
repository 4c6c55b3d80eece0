"""Real-valued sequences for forecasting (d2l.ai §9.1, Working with Sequences).

- ``sine``: the synthetic series of d2l's sequence-model chapter, x_t = sin(0.01 t) + 0.2 ε_t,
  ε_t ~ N(0, 1), t = 1 … T, generated from a seed.
- ``sunspots``: monthly mean sunspot numbers 1749–1983 (2,820 months).
- ``series``: a user's CSV (``data.path``): a header, then one row per time step; the value is in
  ``data.column`` (default: the last column).

A series is split **chronologically** (train, then validation, then test; never shuffled across
the boundaries) and scaled with the mean and standard deviation of the training part only.
Autoregressive windows (:func:`windows`) pair x_{t-τ} … x_{t-1} with the target x_t; a window
belongs to the split of its *target*, and its inputs may reach back into the previous split (they
are past observations), never forward.
"""

from __future__ import annotations

import bisect
import csv
import io
import math
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from seqlab.data.parallel import read_lines
from seqlab.data.registry import resolve
from seqlab.errors import DataError

SUNSPOTS_FILE = "monthly-sunspots.csv"


def sine_series(length: int = 1000, seed: int = 0) -> Tensor:
    """d2l's x_t = sin(0.01 t) + 0.2 · N(0, 1) for t = 1 … length. Shape ``(length,)``."""
    g = torch.Generator().manual_seed(seed)
    t = torch.arange(1, length + 1, dtype=torch.float32)
    return torch.sin(0.01 * t) + 0.2 * torch.randn(length, generator=g)


#: the largest magnitude of a series value: squares and sums of a few million such values stay
#: far inside float32's range (3.4e38), where the models compute
MAX_ABS_VALUE = 1e15
#: cells read as a missing value (besides an empty one)
MISSING_MARKS = ("", "nan", "na", "n/a", "null", "none")


@dataclass(frozen=True)
class CsvSettings:
    """How the reader of a CSV chooses its column and what a missing value means, as an error
    message tells them to: the settings of a config, a command's options, a request's fields."""

    column: str
    missing: str


#: a training run's CSV (``data.path``)
CONFIG_SETTINGS = CsvSettings("data.column", "data.missing")
#: ``seqlab forecast --input`` (and the Python API's ``column=``, ``missing=``)
OPTION_SETTINGS = CsvSettings("--column", "--missing")


def read_series_csv(
    path: str | Path,
    column: str | None = None,
    missing: str = "error",
    settings: CsvSettings = CONFIG_SETTINGS,
) -> list[float]:
    """The values of one column of a CSV, in row order.

    The first row is a header unless its value cell is a number: then the file has no header
    and that row is the first time step (``column`` can then only be the default, the last).
    Every value must be finite and within ±:data:`MAX_ABS_VALUE`.

    Args:
        column: the header name of the values (default: the last column).
        missing: what an empty (or NaN/NA) cell means: ``error`` (a clear error naming file:line),
            ``interpolate`` (linear between its neighbours; at either end, the nearest value) or
            ``drop`` (the row is left out; the steps then close up).

    Raises:
        DataError: no rows, an unknown column, a non-numeric, infinite or too large cell
            (``file:line``), a missing value with ``missing="error"``; the message names the
            ``settings`` that choose the column or let a missing value pass.
    """
    text = "\n".join(line for _, line in read_lines(path))
    return parse_series_csv(text, str(path), column, missing, settings)


def parse_series_csv(
    text: str,
    path: str,
    column: str | None = None,
    missing: str = "error",
    settings: CsvSettings = CONFIG_SETTINGS,
) -> list[float]:
    """:func:`read_series_csv` of a CSV file's ``text`` (errors name it ``path``), e.g. an upload."""
    rows = list(csv.reader(io.StringIO(text.removeprefix("\ufeff"))))
    if not rows:
        raise DataError(f"{path}: empty file; expected a header and one row per time step")
    header = rows[0]
    headerless = _is_number(header[-1]) if header else False
    if column is None:
        idx = len(header) - 1
    elif column in header and not headerless:
        idx = header.index(column)
    elif headerless:
        raise DataError(
            f"{path}:1: the file has no header (its first row, {','.join(header)[:60]!r}, is "
            f"data), so no column is named {column!r}; add a header line, or leave the column "
            "unset to read the last one"
        )
    else:
        raise DataError(
            f"{path}:1: no column {column!r} in the header ({', '.join(map(repr, header))}); "
            f"set {settings.column} to one of them"
        )
    name = f"column {idx + 1}" if headerless else f"column {header[idx]!r}"
    values: list[float | None] = []
    data_rows = rows if headerless else rows[1:]
    blank: list[int] = []  # blank lines not yet followed by data (at the end they are ignored)
    for number, row in enumerate(data_rows, start=1 if headerless else 2):
        if not row or not any(cell.strip() for cell in row):
            blank.append(number)
            continue
        if len(row) != len(header):
            raise DataError(
                f"{path}:{number}: {len(row)} field(s), but the {'first row' if headerless else 'header'} "
                f"has {len(header)}: every row holds the same columns (a decimal comma? seqlab "
                "reads numbers with a decimal point, fields separated by commas)"
            )
        for gap in blank:  # a blank line between values is a time step without its value
            if missing == "error":
                raise DataError(
                    f"{path}:{gap}: blank line between values: a time step without its value; "
                    f"fill it, or set {settings.missing}: interpolate or drop"
                )
            values.append(None)
        blank = []
        cell = row[idx].strip() if idx < len(row) else ""
        if cell.lower() in MISSING_MARKS:
            if missing == "error":
                raise DataError(
                    f"{path}:{number}: missing value in {name}; fill it, or set "
                    f"{settings.missing}: interpolate or drop"
                )
            values.append(None)
            continue
        try:
            value = _number(cell)
        except ValueError:
            raise DataError(f"{path}:{number}: {cell[:40]!r} in {name} is not a number") from None
        if not math.isfinite(value):
            raise DataError(f"{path}:{number}: {cell[:40]!r} in {name} is not finite")
        if abs(value) > MAX_ABS_VALUE:
            raise DataError(
                f"{path}:{number}: {cell[:40]!r} in {name} is beyond ±{MAX_ABS_VALUE:.0e}, the "
                "largest magnitude seqlab forecasts (models compute in float32): rescale the "
                "series, e.g. to thousands"
            )
        values.append(value)
    if missing == "drop":
        out = [v for v in values if v is not None]
    else:
        out = _interpolate(values)
    if not out:
        raise DataError(f"{path}: no values in {name}")
    return out


def _number(cell: str) -> float:
    """A CSV cell's number: Python's ``float`` without its ``1_000`` digit grouping (in a CSV
    an underscore is not part of a number)."""
    if "_" in cell:
        raise ValueError(cell)
    return float(cell)


def _is_number(cell: str) -> bool:
    try:
        _number(cell)
    except ValueError:
        return False
    return cell.strip().lower() not in MISSING_MARKS


def check_values(values: Sequence[float], what: str) -> None:
    """Refuse a series value that is NaN, infinite or beyond ±:data:`MAX_ABS_VALUE` (``what``
    names the series in the message)."""
    for i, v in enumerate(values):
        if not math.isfinite(v) or abs(v) > MAX_ABS_VALUE:
            problem = "is not finite" if not math.isfinite(v) else f"is beyond ±{MAX_ABS_VALUE:.0e}"
            raise DataError(
                f"{what}: value {i} ({v}) {problem}; a series holds finite numbers within "
                f"±{MAX_ABS_VALUE:.0e} (models compute in float32)"
            )


def _interpolate(values: list[float | None]) -> list[float]:
    known = [i for i, v in enumerate(values) if v is not None]
    if not known:
        return []
    out = []
    for i, v in enumerate(values):
        if v is not None:
            out.append(v)
            continue
        j = bisect.bisect_left(known, i)  # known[j - 1] < i < known[j]
        before = known[j - 1] if j > 0 else None
        after = known[j] if j < len(known) else None
        if before is None or after is None:
            out.append(values[after if before is None else before])  # type: ignore[arg-type]
        else:
            w = (i - before) / (after - before)
            out.append((1 - w) * values[before] + w * values[after])  # type: ignore[operator]
    return out


def load_sunspots() -> Tensor:
    """Monthly sunspot numbers 1749-01 … 1983-12, ``(2820,)``."""
    return torch.tensor(read_series_csv(resolve("sunspots", SUNSPOTS_FILE), "Sunspots"))


@dataclass(frozen=True)
class Split:
    """Chronological boundaries: train ``[0, val_start)``, val ``[val_start, test_start)``,
    test ``[test_start, n)``."""

    n: int
    val_start: int
    test_start: int

    def targets(self, name: str) -> range:
        """Time steps whose values are targets in split ``name``."""
        return {
            "train": range(0, self.val_start),
            "val": range(self.val_start, self.test_start),
            "test": range(self.test_start, self.n),
        }[name]


def chronological_split(n: int, val_fraction: float, test_fraction: float, window: int) -> Split:
    """Split n steps in time order; each part must hold more than ``window`` steps of targets."""
    n_test = round(n * test_fraction)
    n_val = round(n * val_fraction)
    split = Split(n, n - n_test - n_val, n - n_test)
    if split.val_start <= window or n_val < 1 or n_test < 1:
        raise DataError(
            f"a series of {n} steps is too short for window τ = {window} with val_fraction "
            f"{val_fraction} and test_fraction {test_fraction}: the training part needs more than "
            f"{window} steps and validation and test at least one each"
        )
    return split


@dataclass(frozen=True)
class Scaler:
    """z = (x − mean) / std, with the training part's statistics."""

    mean: float
    std: float

    @classmethod
    def fit(cls, x: Tensor) -> Scaler:
        x = x.double()  # large values: squares in float32 could overflow
        std = float(x.std()) if len(x) > 1 else 1.0
        return cls(float(x.mean()), std if std > 0 else 1.0)

    def __call__(self, x: Tensor) -> Tensor:
        return (x - self.mean) / self.std

    def invert(self, z: Tensor) -> Tensor:
        return z * self.std + self.mean


def windows(x: Tensor, window: int, targets: range) -> tuple[Tensor, Tensor]:
    """Autoregressive examples for the target steps ``targets`` (those with a full window).

    Shape:
        x ``(N,)`` -> inputs ``(M, τ)`` = x[t-τ : t] for each target t, targets ``(M,)`` = x[t].
    """
    ts = [t for t in targets if t >= window]
    if not ts:
        return torch.zeros(0, window), torch.zeros(0)
    idx = torch.tensor(ts)[:, None] + torch.arange(-window, 0)[None, :]  # (M, τ)
    return x[idx], x[torch.tensor(ts)]


class WindowBatches:
    """Shuffled minibatches of ``(inputs (B, τ), targets (B,))``, a pure function of (seed, epoch)."""

    carries_state = False

    def __init__(
        self, inputs: Tensor, targets: Tensor, batch_size: int, shuffle: bool = True, seed: int = 0
    ) -> None:
        if not len(targets):
            raise DataError("no autoregressive windows to train on")
        self.inputs, self.targets, self.batch_size = inputs, targets, batch_size
        self.shuffle, self.seed, self.epoch = shuffle, seed, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return -(-len(self.targets) // self.batch_size)

    def __iter__(self) -> Iterator[tuple[Tensor, Tensor]]:
        order = list(range(len(self.targets)))
        if self.shuffle:
            random.Random(self.seed * 100_003 + self.epoch).shuffle(order)
        for i in range(0, len(order), self.batch_size):
            idx = torch.tensor(order[i : i + self.batch_size])
            yield self.inputs[idx], self.targets[idx]


def k_step_predictions(
    predict: object, x: Tensor, window: int, k: int, starts: Sequence[int]
) -> Tensor:
    """k-step-ahead predictions by feeding predictions back (d2l.ai §9.1.4).

    For each start t, the model sees the observed x[t-τ : t] and predicts x̂_t, then x̂_{t+1}
    from a window that includes x̂_t, and so on: row i holds x̂_{t_i}, …, x̂_{t_i + k - 1}.

    Args:
        predict: a callable mapping windows ``(B, τ)`` to next values ``(B,)``.

    Shape:
        x ``(N,)`` -> ``(len(starts), k)``.
    """
    hist = torch.stack([x[t - window : t] for t in starts])  # (B, τ)
    out = []
    for _ in range(k):
        nxt = predict(hist[:, -window:])  # type: ignore[operator]  # (B,)
        out.append(nxt)
        hist = torch.cat([hist, nxt[:, None]], dim=1)  # (B, τ + step)
    return torch.stack(out, dim=1)  # (B, k)


# ---------------------------------------------------------------------------------------- records


#: the readers of this module's datasets, by name (their records: :mod:`seqlab.builtin_records`)
READERS: dict[str, Callable[[Any, int], Any]] = {
    "sine": lambda data, seed: sine_series(data.length, seed),
    "sunspots": lambda data, seed: load_sunspots(),
    "series": lambda data, seed: torch.tensor(
        read_series_csv(data.path, data.column, data.missing), dtype=torch.float32
    ),
}
