"""The classification task served: ``POST /classify`` (labels and probabilities of texts or
images, and on request self-attention and, for a ViT, attention rollout over the image; Abnar &
Zuidema 2020), declared once as :data:`SERVICE`."""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from pydantic import BaseModel, Field
from torch import Tensor

from seqlab.data.images import ImageTooLarge
from seqlab.errors import SeqlabError
from seqlab.serving.limits import LimitExceeded, check
from seqlab.serving.service import (
    InputError,
    LayerHeads,
    Matrix,
    OptionsHandler,
    Request,
    Service,
    read_base64,
    read_texts,
    unknown_warnings,
    warnings_field,
    weights,
)


class ClassifyRequest(Request):
    text: str | list[str] | None = Field(None, description="text classifiers: one text or a list")
    image: str | list[str] | None = Field(
        None,
        description="image classifiers: base64 image files (PNG, JPEG, …), or data: URLs",
    )
    attention: bool = Field(False, description="also return self-attention (and ViT's rollout)")


class ClassAttention(BaseModel):
    tokens: list[str] = Field(description="tokens or patches ([CLS] first when the model has it)")
    layers: LayerHeads = Field(description="layers × heads × tokens × tokens")
    rollout: Matrix | None = Field(
        None, description="ViT: attention rollout over the patch grid (rows × columns)"
    )


class Classification(BaseModel):
    label: str
    probability: float
    probabilities: dict[str, float]
    notes: list[str] = Field(default_factory=list)
    attention: ClassAttention | None = None


class ClassifyResponse(BaseModel):
    model: str
    results: list[Classification]
    warnings: list[str] = warnings_field()


@dataclass(frozen=True)
class ClassifyInputs:
    """One request's inputs, read: its texts or its image files, and whether it asks for
    attention (a request field, not an option of ``seqlab classify``)."""

    items: list[str] | list[bytes]
    attention: bool


class ClassificationHandler(OptionsHandler):
    """``POST /classify``: labels and probabilities of texts or images, and self-attention
    (and, for a ViT, attention rollout over the image; Abnar & Zuidema 2020). The generic
    handler: the classifiers' command takes no options model, so every job is in one group and
    the batch's texts (or images) are classified by one call of the predictor."""

    def details(self) -> dict[str, Any]:
        p = self.predictor
        return {
            "labels": list(p.labels),
            "input": "image" if p.images else "text",
            "image_size": p.image_size if p.images else None,
            "attention": p.attention_kinds,
        }

    def inputs(self, request: ClassifyRequest) -> tuple[ClassifyInputs, int]:
        p = self.predictor
        if request.attention and not p.attention_kinds:
            raise InputError(
                f"model {self.name!r} (model.arch={self.cfg.model.arch}) has no self-attention; "
                "the transformer_classifier and vit models have"
            )
        if p.images:
            if request.text is not None:
                raise InputError(f"model {self.name!r} classifies images: send image, not text")
            if request.image is None:
                raise InputError("give image: one base64 image file or a list")
            single = isinstance(request.image, str)
            images = [request.image] if single else list(request.image)
            if not images:
                raise InputError("image is an empty list; give at least one image")
            check(len(images), self.limits, "max_texts", "the number of images", 413)
            items: Any = [
                read_base64(
                    x, "image" if single else f"image {i}", self.limits, "data:image/png;base64,..."
                )
                for i, x in enumerate(images, start=1)
            ]
        else:
            if request.image is not None:
                raise InputError(f"model {self.name!r} classifies text: send text, not image")
            items = read_texts(request.text, self.limits)
        return ClassifyInputs(items, request.attention), len(items)

    def _image(self, data: bytes, where: str) -> tuple[Tensor, str | None]:
        """An uploaded image as the predictor reads it: its pixel count, from the header, within
        ``max_image_pixels`` before anything is decoded (a decompression bomb is a 413)."""
        limit = self.limits.max_image_pixels
        try:
            return self.predictor.read_image(io.BytesIO(data), max_pixels=limit)
        except ImageTooLarge as exc:
            count = f"is {exc.pixels:,}" if exc.pixels is not None else "is more than PIL opens"
            raise LimitExceeded(
                f"{where}'s pixel count {count}, over the server's limit max_image_pixels={limit}"
                + ("" if exc.limit == limit else f" (PIL opens at most {exc.limit:,})"),
                "max_image_pixels",
                413,
            ) from None
        except SeqlabError:
            raise InputError(f"{where} is not an image file PIL can read") from None

    def answer(self, inputs: list[ClassifyInputs], options: None) -> list[Any]:
        """The jobs' texts (or images) classified together; a job whose image cannot be read
        fails alone."""
        p = self.predictor
        results: list[Any] = [None] * len(inputs)
        read: list[Any] = []  # per job that can run: its texts or its images (N, C, H, W)
        notes: list[list[str]] = []
        live = []
        for j, job in enumerate(inputs):
            try:
                if p.images:
                    decoded = [
                        self._image(x, f"image {i}")  # type: ignore[arg-type]
                        for i, x in enumerate(job.items, start=1)
                    ]
                    read.append(torch.stack([x for x, _ in decoded]))
                    notes.append([f"image {i}: {n}" for i, (_, n) in enumerate(decoded, 1) if n])
                else:
                    read.append(list(job.items))
                    notes.append([])
                live.append(j)
            except Exception as exc:  # noqa: BLE001 - this job fails alone
                results[j] = exc
        if not live:
            return results
        if p.images:
            probs = p.probabilities(torch.cat(read), batch_size=self.limits.max_batch)
        else:
            probs = p.probabilities([t for x in read for t in x], self.limits.max_batch)
        start = 0
        for j, x, job_notes in zip(live, read, notes, strict=True):
            n = len(x)
            try:
                results[j] = self._response(inputs[j], x, probs[start : start + n], job_notes)
            except Exception as exc:  # noqa: BLE001
                results[j] = exc
            start += n
        return results

    def _response(
        self, job: ClassifyInputs, items: Any, probs: Tensor, notes: list[str]
    ) -> ClassifyResponse:
        labels = self.predictor.labels
        out = []
        for i, row in enumerate(probs):
            best = int(row.argmax())
            out.append(
                Classification(
                    label=labels[best],
                    probability=float(row[best]),
                    probabilities={lab: float(q) for lab, q in zip(labels, row, strict=True)},
                    notes=[n for n in notes if n.startswith(f"image {i + 1}:")],
                    attention=self._attention(items[i]) if job.attention else None,
                )
            )
        unknown = [] if self.predictor.images else unknown_warnings(self.predictor, items)
        return ClassifyResponse(model=self.name, results=out, warnings=unknown)

    def _attention(self, item: str | Tensor) -> ClassAttention:
        p = self.predictor
        names, maps = p.attention(item)  # L × (h, T, T)
        rollout = None
        if "rollout" in p.attention_kinds:
            share = p.rollout(maps)  # (N,): a square grid of patches, row by row
            side = math.isqrt(len(share))
            if side * side == len(share):
                rollout = weights(share.reshape(side, side))
        return ClassAttention(
            tokens=list(names), layers=[weights(w) for w in maps], rollout=rollout
        )


SERVICE = Service(
    route="/classify",
    request=ClassifyRequest,
    response=ClassifyResponse,
    handler=ClassificationHandler,
    summary="Classify texts or images",
    panel=Path(__file__).with_name("panel.js"),
)
