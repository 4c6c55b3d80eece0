"""Scoring one translation run (:class:`Scorer`): its translations scored against references as
the run reads text, and ``seqlab evaluate``'s evaluation around them: what is scored
(:class:`~seqlab.tasks.translation.scoring.EvaluationSet`), the report, the translations
written. :class:`~seqlab.tasks.translation.Translator` holds one and hands it what it
translates; the scores themselves are :mod:`seqlab.tasks.translation.scoring`'s."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from seqlab.atomic import atomic_write_text
from seqlab.config import DecodeConfig, ExperimentConfig
from seqlab.data.tokenizers import normalize_text
from seqlab.data.vocab import quiet_unknown
from seqlab.storage.outputs import api_output_file
from seqlab.storage.text import own_data
from seqlab.tasks.translation.decoding import SourceReader
from seqlab.tasks.translation.scoring import (
    EvaluationSet,
    TranslationReport,
    paper_lang,
    score_translations,
)

#: sources and their references -> the scores of the sources' translations, with the
#: translations (key ``translations``): :meth:`~seqlab.tasks.translation.Translator.score` with
#: the options of one call
Score = Callable[[list[str], list[str]], dict[str, Any]]


class Scorer:
    """Scores the translations of the run of ``cfg`` against references (:meth:`score`) and
    runs its evaluations (:meth:`evaluate`); the translator translates, this scores.

    Args:
        cfg: the run's config: its dataset and languages (which BLEU applies:
            :func:`~seqlab.tasks.translation.scoring.paper_lang`, and its tokenizer) and
            ``data.normalize`` (how references are read).
        reader: the run's source reader, which names the unknown tokens of a ``--src`` file by
            line (:meth:`~seqlab.tasks.translation.scoring.EvaluationSet.read`).
    """

    def __init__(self, cfg: ExperimentConfig, reader: SourceReader) -> None:
        self.cfg, self.reader = cfg, reader

    def score(self, outputs: list[str], references: Sequence[str]) -> dict[str, Any]:
        """The translations ``outputs`` scored against ``references``
        (:func:`~seqlab.tasks.translation.scoring.score_translations`: BLEU, chrF, …), and the
        outputs (key ``translations``). A run that reads text through ``data.normalize:
        simplified`` writes simplified Chinese, and is scored against the references read the
        same way (a traditional reference is compared in simplified characters)."""
        d = self.cfg.data
        if d.normalize == "simplified":  # scored as the run was trained: in one script
            references = [normalize_text(r, d.normalize) for r in references]
        scores = score_translations(outputs, references, paper_lang(self.cfg), d.tgt_lang)
        return {**scores, "translations": outputs}

    def evaluate(
        self,
        split: str | None,
        files: Mapping[str, str],
        decode: DecodeConfig,
        score: Score,
        checkpoint: str | None,
        output: str | Path | None = None,
        force: bool = False,
    ) -> TranslationReport:
        """The report of ``score`` on a ``split`` of the run's dataset or on ``files={"src":
        FILE, "ref": FILE}`` (checked already, by the translator), decoded by ``decode`` with
        the weights of ``checkpoint``; ``output``: also write the translations there
        (atomically), by the rule of ``--output``
        (:func:`seqlab.storage.outputs.output_file`: a file seqlab did not write is refused
        before any work unless ``force``). The unknown tokens of ``--src`` are reported when it
        is read, by line; those of a split are not (the run's own data)."""
        read = {f"--{k}": v for k, v in files.items()}
        written = api_output_file(output, "output", force, read)  # checked now, before any work
        data = EvaluationSet.read(self.cfg, split, files, self.reader)
        # --src: unknown tokens reported when read, by line; a split: the run's own data
        with quiet_unknown(), own_data() if data.own else contextlib.nullcontext():
            scores = score(data.sources, data.references)
        report = data.report(checkpoint, scores, decode)
        if output:
            with written:
                atomic_write_text(output, "".join(o + "\n" for o in report.outputs))
        return report
