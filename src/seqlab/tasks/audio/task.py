"""Training an audio classifier: the dataset's clips at the model's rate, the front end's
feature normalisation measured on the training clips, batches of padded waveforms, the
classifiers' cross-entropy and validation by accuracy (:func:`build_experiment`).

**Calibration.** After training, the best checkpoint's logits on the validation split choose a
softmax temperature (Guo et al. 2017; :mod:`seqlab.tasks.classifier.calibration`), written
to ``calibration.json`` and applied when the run is loaded: with ``data.val_speaker`` the
probabilities are those of a voice the model never trained on.

**Normalisation.** Each log-mel channel is standardised by the mean and standard deviation of
that channel over every frame of the training clips (never validation or test), measured once
before training and stored in the model's weights
(:meth:`seqlab.models.audio.AudioClassifier.set_normalisation`), so a loaded run needs nothing
else.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import torch
from torch import nn

from seqlab import catalog
from seqlab.builtin_records import RUN_FILES
from seqlab.config import ExperimentConfig
from seqlab.data import readers
from seqlab.data.audio_batching import AudioBatches
from seqlab.data.parallel import DataWarning
from seqlab.errors import DataError
from seqlab.nn.audio import feature_stats
from seqlab.objective import Selection
from seqlab.runtime.progress import progress
from seqlab.storage import checkpoints as ckpt
from seqlab.tasks.audio.predictor import ClipClassifier, model_of
from seqlab.tasks.base import Experiment
from seqlab.tasks.classifier.base import Classes, forward_batches
from seqlab.tasks.classifier.calibration import CALIBRATION, Calibration
from seqlab.tasks.classifier.training import cross_entropy_loss, validation

#: files an audio run holds besides its config and checkpoints
ARTEFACTS = RUN_FILES["audio_classification"]  # classes.json, CALIBRATION
#: an audio classifier chooses checkpoints by validation accuracy, higher is better
SELECT = Selection("val_acc", "max")


@torch.no_grad()
def normalisation(model: nn.Module, batches: AudioBatches) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and standard deviation ``(n_mels,)`` of the log-mel channels over every frame of
    ``batches`` (the front end's features before standardisation:
    :meth:`~seqlab.models.audio.AudioClassifier.raw_features`)."""
    feats, lengths = [], []
    for batch in progress(batches, "measuring features", unit="batch"):
        f, frames = model.raw_features(batch.inputs, batch.lengths)  # type: ignore[operator]
        feats += [f[i, : int(n)] for i, n in enumerate(frames)]
        lengths += [int(n) for n in frames]
    stacked = torch.nn.utils.rnn.pad_sequence(feats, batch_first=True)  # (N, T, n_mels)
    return feature_stats(stacked, torch.tensor(lengths))


def build_experiment(cfg: ExperimentConfig, run_dir: Path | None = None) -> Experiment:
    """Clips, labels (the run's own when resuming), normalisation, batches and the model."""
    spec = catalog.datasets()[cfg.data.dataset]
    if run_dir is None and spec.sample_rate and cfg.data.sample_rate > spec.sample_rate:
        warnings.warn(
            f"data.sample_rate={cfg.data.sample_rate} is above {spec.name}'s recordings, made at "
            f"{spec.sample_rate} Hz: every clip is upsampled, so the model learns nothing above "
            f"{spec.sample_rate // 2} Hz, and each {spec.sample_rate} Hz recording it later "
            f"classifies is upsampled with a warning; set data.sample_rate={spec.sample_rate} "
            "for this dataset",
            DataWarning,
            stacklevel=2,
        )
    examples = readers.read(cfg.data, cfg.train.seed)
    if run_dir is not None:
        classes = Classes.load(run_dir / "classes.json")
    else:
        labels = list(spec.labels) or sorted({label for _, label in examples["train"]})
        classes = Classes(labels)
    ids = {label: i for i, label in enumerate(classes.labels)}
    unknown = sorted({lab for split in examples.values() for _, lab in split} - set(ids))
    if unknown:
        raise DataError(
            f"data.dataset={cfg.data.dataset}: labels {unknown[:5]} are not among the run's "
            f"classes {classes.labels}"
        )

    def batches(split: str, size: int, shuffle: bool) -> AudioBatches:
        pairs = examples[split]
        waves = [clip.samples for clip, _ in pairs]
        return AudioBatches(
            waves, [ids[label] for _, label in pairs], size, shuffle=shuffle, seed=cfg.train.seed
        )

    d = cfg.data
    train = batches("train", d.batch_size, shuffle=True)
    val = batches("val", max(d.batch_size, 64), shuffle=False)
    torch.manual_seed(cfg.train.seed)
    model = model_of(cfg, len(classes.labels))
    if run_dir is None:  # resuming: the checkpoint holds them
        model.set_normalisation(*normalisation(model, batches("train", 64, False)))  # type: ignore[operator]

    def calibrate(run_dir: Path) -> dict[str, object]:
        """Fit the temperature of the best checkpoint on validation (``calibration.json``)."""
        best = ckpt.find(run_dir, "best")
        fresh = model_of(cfg, len(classes.labels))
        ckpt.load_model_weights(fresh, best)
        logits, labels = forward_batches(fresh.eval(), val)
        found = Calibration.fit(logits, labels, "val", best.name)
        found.save(run_dir / CALIBRATION)
        return {"calibration": found.summary()}

    return Experiment(
        model=model,
        train_batches=train,
        loss_fn=cross_entropy_loss(cfg.train.label_smoothing),
        evaluate=validation(val, len(classes.labels)),
        select=SELECT,
        save_artefacts=lambda directory: classes.save(directory / "classes.json"),
        predictor=ClipClassifier(model, cfg, classes),
        meta={"num_classes": len(classes.labels)},
        finish=calibrate,
        unit="ex",
        perplexity=False,
    )
