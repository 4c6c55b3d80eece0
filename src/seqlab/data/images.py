"""Images: MNIST's IDX files, and a user's image files for ``seqlab classify``.

IDX (LeCun et al.) is a big-endian header — two zero bytes, a type code (0x08 = uint8), the
number of dimensions — then one 4-byte size per dimension and the raw values. Images come out as
``(N, 1, 28, 28)`` float tensors scaled to [0, 1] and normalised with the training set's mean and
standard deviation (stored with the run, so inference uses the same numbers).

A user's image file is measured from its header before a pixel is decoded (:func:`load_image`):
one over the pixel limit — the caller's (the server's ``max_image_pixels``), else PIL's
``Image.MAX_IMAGE_PIXELS`` — is refused with :class:`ImageTooLarge`, so that a small file
claiming 20000×20000 pixels (a decompression bomb) is an error naming the file, never PIL's
``DecompressionBombError`` nor gigabytes of memory.
"""

from __future__ import annotations

import gzip
import re
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import torch
from torch import Tensor

from seqlab.data.classification import hold_out
from seqlab.data.registry import resolve
from seqlab.errors import DataError

MNIST_FILES = {
    "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
    "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
}


def read_idx(path: str | Path) -> np.ndarray:
    """An IDX file (gzip or plain) as a uint8 array of the shape its header gives."""
    path = Path(path)
    try:
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
    except FileNotFoundError:
        raise DataError(f"file not found: {path}") from None
    except (OSError, EOFError) as exc:
        raise DataError(f"{path}: corrupt gzip stream ({exc})") from None
    if len(raw) < 4 or raw[:2] != b"\0\0" or raw[2] != 0x08:
        raise DataError(f"{path}: not an IDX file of unsigned bytes (header {raw[:4].hex()})")
    ndim = raw[3]
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise DataError(f"{path}: IDX header cut short")
    shape = struct.unpack(f">{ndim}I", raw[4:header])
    size = int(np.prod(shape))
    if len(raw) - header != size:
        raise DataError(
            f"{path}: IDX header promises {size} values {shape}, the file holds {len(raw) - header}"
        )
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(shape)


def load_mnist(split: str) -> tuple[Tensor, Tensor]:
    """MNIST ``train`` (60,000) or ``test`` (10,000): images ``(N, 1, 28, 28)`` in [0, 1] and
    labels ``(N,)``."""
    images_file, labels_file = MNIST_FILES[split]
    images = read_idx(resolve("mnist", images_file))
    labels = read_idx(resolve("mnist", labels_file))
    if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
        raise DataError(
            f"MNIST {split}: images {images.shape} and labels {labels.shape} do not pair up"
        )
    x = torch.from_numpy(images.copy()).float().div_(255.0).unsqueeze(1)  # (N, 1, 28, 28)
    return x, torch.from_numpy(labels.astype(np.int64))


def read_mnist(data: Any, seed: int) -> dict[str, tuple[Tensor, Tensor]]:
    """MNIST's splits: ``train`` and ``val`` (``data.val_examples`` held out of it), ``test``."""
    x, y = load_mnist("train")
    train, val = hold_out(len(y), data.val_examples, seed, "mnist")
    train = train[: data.num_examples]
    return {"train": (x[train], y[train]), "val": (x[val], y[val]), "test": load_mnist("test")}


class ImageTooLarge(DataError):
    """An image file whose header claims more pixels than the limit (``pixels`` is None when
    only PIL knows how many: it refused the file outright)."""

    def __init__(self, message: str, pixels: int | None, limit: int) -> None:
        super().__init__(message)
        self.pixels, self.limit = pixels, limit


def _too_large(
    path: Any, shape: str | None, pixels: int | None, limit: int, size: int
) -> ImageTooLarge:
    count = f"{pixels:,} pixels" if pixels is not None else "more pixels than PIL opens"
    count = f"{shape} = {count}" if shape else count
    return ImageTooLarge(
        f"{path}: the image is {count}, over the limit of {limit:,} pixels; nothing was "
        f"decoded (the model reads {size}×{size}: shrink the image first)",
        pixels,
        limit,
    )


def load_image(
    path: str | Path | BinaryIO, size: int, channels: int, max_pixels: int | None = None
) -> tuple[Tensor, str | None]:
    """An image file (or a file object holding one) as ``(C, size, size)`` in [0, 1], and a note
    when it had to be converted (mode or size). MNIST digits are white on black: a mostly light
    image is inverted (noted).

    The pixel count is read from the header before anything is decoded: over ``max_pixels``
    (default PIL's ``Image.MAX_IMAGE_PIXELS``) it is an :class:`ImageTooLarge`."""
    from PIL import Image, UnidentifiedImageError

    limit = Image.MAX_IMAGE_PIXELS if max_pixels is None else max_pixels
    try:
        img = Image.open(path)  # reads the header only
    except FileNotFoundError:
        raise DataError(f"image not found: {path}") from None
    except Image.DecompressionBombError as exc:  # over twice PIL's limit: refused outright
        found = re.search(r"\((\d+) pixels\)", str(exc))  # PIL's message gives the count
        bound = 2 * (Image.MAX_IMAGE_PIXELS or 0)
        pixels = int(found[1]) if found else None
        raise _too_large(path, None, pixels, min(limit or bound, bound), size) from None
    except (UnidentifiedImageError, OSError) as exc:
        raise DataError(f"{path}: not an image file PIL can read ({exc})") from None
    with img:
        width, height = img.size
        if limit is not None and width * height > limit:
            raise _too_large(path, f"{width}×{height}", width * height, limit, size)
        try:
            img.load()
        except OSError as exc:
            raise DataError(f"{path}: not an image file PIL can read ({exc})") from None
        return _converted(img, size, channels)


def _converted(img: Any, size: int, channels: int) -> tuple[Tensor, str | None]:
    """A decoded image at ``size`` and ``channels`` (see :func:`load_image`), and its notes."""
    from PIL import Image

    notes = []
    mode = "L" if channels == 1 else "RGB"
    if img.mode != mode:
        notes.append(f"mode {img.mode} → {mode}")
        img = img.convert(mode)
    if img.size != (size, size):
        notes.append(f"{img.size[0]}×{img.size[1]} → {size}×{size}")
        img = img.resize((size, size), Image.Resampling.BILINEAR)
    x = torch.from_numpy(np.asarray(img, dtype=np.float32) / 255.0)
    x = x.unsqueeze(0) if channels == 1 else x.permute(2, 0, 1)  # (C, H, W)
    if channels == 1 and x.mean() > 0.5:
        notes.append("inverted (light background; the model reads light digits on dark)")
        x = 1.0 - x
    return x, ("; ".join(notes) or None)


#: the readers of this module's datasets, by name (their records: :mod:`seqlab.builtin_records`)
READERS: dict[str, Callable[[Any, int], Any]] = {
    "mnist": read_mnist,
}
