"""Audio classification: a recording in, a category out (the lecture's second opening problem:
an audio sequence of length n → a category), on the Free Spoken Digit Dataset or a folder of
WAV files.

A recording is read as mono float samples at the model's rate (any WAV: PCM or float, any rate,
several channels averaged; :mod:`seqlab.data.audio`); the model's front end turns it into
normalised log-mel frames and an existing classifier reads those frames where it reads embedded
words (:mod:`seqlab.models.audio`): the BiLSTM/GRU over frames, the 1-D CNN, the Transformer
encoder, or the Vision Transformer on spectrogram patches (Gong et al. 2021, AST). A run
directory holds ``classes.json`` besides its config and checkpoints (the normalisation is in the
weights).

**Layout**: :mod:`~seqlab.tasks.audio.predictor` (:class:`ClipClassifier`, a third kind of
:class:`~seqlab.tasks.classifier.base.Classifier`), :mod:`~seqlab.tasks.audio.reader` (each
clip heard and read by the model once: probabilities, frames, attention),
:mod:`~seqlab.tasks.audio.task` (rules, normalisation, the experiment),
:mod:`~seqlab.tasks.audio.figures` (spectrograms, attention over time),
:mod:`~seqlab.tasks.audio.service` (``POST /classify-audio``) and ``panel.js`` (the page's
panel: upload or record from the microphone); the task is declared once, below (:data:`TASK`).
"""

from seqlab import catalog
from seqlab.config.experiment import TASK_RULES
from seqlab.tasks.audio.predictor import ClipClassifier
from seqlab.tasks.audio.service import SERVICE
from seqlab.tasks.audio.task import ARTEFACTS, SELECT, build_experiment

TASK = catalog.register_task(
    catalog.TaskSpec(
        "audio_classification",
        build_experiment,
        (ClipClassifier,),
        SELECT,
        frozenset(ARTEFACTS),
        rules=TASK_RULES["audio_classification"],  # config checks, with the config (seqlab.config)
        service=SERVICE,
        summary="a category for a recording",
    )
)

__all__ = ["ARTEFACTS", "SELECT", "SERVICE", "TASK", "ClipClassifier", "build_experiment"]
