"""Scoring translations: sacreBLEU BLEU and chrF with their signatures, the paper-style BLEU
(:func:`score_translations`), sentences translated and scored (:func:`score`, behind
:meth:`~seqlab.tasks.translation.Translator.score`), and ``seqlab evaluate`` (:func:`evaluate`,
behind :meth:`~seqlab.tasks.translation.Translator.evaluate`)."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from seqlab import catalog
from seqlab.config import ExperimentConfig
from seqlab.data.vocab import quiet_unknown, warn_unknown
from seqlab.errors import SeqlabError
from seqlab.storage.atomic import atomic_write_text, check_replaceable
from seqlab.storage.outputs import check_not_input, check_not_run_file
from seqlab.storage.text import own_data, read_lines
from seqlab.tasks.paper_bleu import paper_bleu
from seqlab.tasks.report import Report
from seqlab.tasks.translation import artefacts
from seqlab.tasks.translation.decoding import as_sentences, decode_options


def paper_lang(cfg: ExperimentConfig) -> str | None:
    """The target language for the paper-style BLEU, or None where it does not apply."""
    spec = catalog.datasets()[cfg.data.dataset]
    return cfg.data.tgt_lang if spec.natural_language else None


def score_translations(
    hypotheses: Sequence[str], references: Sequence[str], lang: str | None = None
) -> dict[str, Any]:
    """sacreBLEU BLEU and chrF (cased, detokenised) with signatures, lowercased BLEU, and with
    the target language ``lang`` the paper-style BLEU (``bleu_paper``, see
    :mod:`seqlab.tasks.paper_bleu`)."""
    from sacrebleu.metrics import BLEU, CHRF

    bleu, chrf, bleu_lc = BLEU(), CHRF(), BLEU(lowercase=True)
    refs = [list(references)]
    b, c, lc = (
        bleu.corpus_score(list(hypotheses), refs),
        chrf.corpus_score(list(hypotheses), refs),
        bleu_lc.corpus_score(list(hypotheses), refs),
    )
    exact = sum(h.strip() == r.strip() for h, r in zip(hypotheses, references, strict=True))
    scores: dict[str, Any] = {
        "bleu": b.score,
        "chrf": c.score,
        "bleu_lc": lc.score,
        "exact_match": exact / max(len(references), 1),
        "bleu_signature": str(bleu.get_signature()),
        "chrf_signature": str(chrf.get_signature()),
        "bleu_lc_signature": str(bleu_lc.get_signature()),
        "sentences": len(references),
    }
    if lang is not None:
        paper = paper_bleu(hypotheses, references, lang)
        scores["bleu_paper"], scores["bleu_paper_signature"] = paper.score, paper.signature
    return scores


def score(
    translator: Any,
    sources: Sequence[str],
    references: Sequence[str],
    beam: int | None = None,
    length_penalty: float | None = None,
    engine: str = "pytorch",
    quantize: str | None = None,
) -> dict[str, Any]:
    """``sources`` translated by ``translator`` and scored against ``references``
    (:func:`score_translations`), the outputs under ``translations``; both lists of sentences,
    at least one, that pair up. ``translator``: a :class:`~seqlab.tasks.translation.Translator`
    (:meth:`~seqlab.tasks.translation.Translator.score` calls this)."""
    if isinstance(sources, str) or isinstance(references, str):
        raise SeqlabError("score takes lists of sentences (sources and references), not a string")
    sources, _ = as_sentences(sources)
    references, _ = as_sentences(references, "reference")
    if not sources and not references:
        raise SeqlabError("nothing to score: 0 source sentences and 0 references")
    if len(sources) != len(references):
        raise SeqlabError(
            f"{len(sources)} source sentences but {len(references)} references; they must "
            "pair up line by line"
        )
    outputs = translator.translate(
        sources, beam=beam, length_penalty=length_penalty, engine=engine, quantize=quantize
    )
    scores = score_translations(outputs, references, paper_lang(translator.cfg))
    return {**scores, "translations": outputs}


@dataclass
class TranslationReport(Report):
    """BLEU, chrF and the paper-style BLEU with their signatures; ``outputs``: the
    translations scored (not part of the JSON)."""

    outputs: list[str] = field(default_factory=list)

    def summary(self) -> str:
        s = self.scores
        return "\n".join(
            [
                f"{self.where}: BLEU {s['bleu']:.2f}  chrF {s['chrf']:.2f}  "
                f"(exact match {s['exact_match']:.1%}; {s['sentences']} sentences, "
                f"beam {s['beam_size']}"
                + (f", length penalty {s['length_penalty']:g})" if "length_penalty" in s else ")"),
                f"  {s['bleu_signature']}",
                f"  {s['chrf_signature']}",
            ]
            + (
                [
                    f"{self.where}: paper-style BLEU {s['bleu_paper']:.2f} (lowercased, "
                    "Moses-normalised and tokenised, as multi-bleu.perl on Multi30k's "
                    "lc.norm.tok files)",
                    f"  {s['bleu_paper_signature']}",
                ]
                if "bleu_paper" in s
                else []
            )
        )


def evaluate(
    translator: Any,
    split: str | None = None,
    files: Mapping[str, str | Path] | None = None,
    beam: int | None = None,
    length_penalty: float | None = None,
    engine: str = "pytorch",
    quantize: str | None = None,
    output: str | Path | None = None,
) -> TranslationReport:
    """BLEU, chrF and paper-style BLEU on a ``split`` of the run's dataset (default ``val``;
    reads the data) or on ``files={"src": FILE, "ref": FILE}``; ``output``: also write the
    translations there (atomically). Unknown tokens of ``src`` are reported by ``FILE:LINE``
    (those of the run's own data are not: its vocabulary was built leaving them out).

    ``translator``: a :class:`~seqlab.tasks.translation.Translator`
    (:meth:`~seqlab.tasks.translation.Translator.evaluate` calls this)."""
    split, files = translator._source(split, files, "val")
    options = {"beam": beam, "length_penalty": length_penalty}
    translator.check("evaluate", {**options, "engine": engine, "quantize": quantize})
    if output:  # before any work: never a run's own file, nor one being read
        check_replaceable(output, "output")
        check_not_run_file(output, "output")
        check_not_input(output, {f"--{k}": v for k, v in files.items()}, "output")
    if files:
        if set(files) != {"src", "ref"}:
            raise SeqlabError(
                "--src and --ref go together: the source sentences and their references"
            )
        sources, references = (
            read_lines(files["src"], "--src"),
            read_lines(files["ref"], "--ref"),
        )
        if not sources and not references:
            raise SeqlabError(
                f"--src {files['src']} and --ref {files['ref']} are empty: there is nothing "
                "to score"
            )
        if len(sources) != len(references):
            raise SeqlabError(
                f"--src {files['src']} has {len(sources)} lines but --ref {files['ref']} has "
                f"{len(references)}; they must pair up line by line"
            )
        source = dict(files)
        warn_unknown(
            (
                (f"{files['src']}:{n}", translator.unknown_tokens(s))
                for n, s in enumerate(sources, start=1)
            ),
            2,
        )
    else:
        assert split is not None
        splits = artefacts.load_pairs(translator.cfg)  # the module's name: tests replace it
        if split not in splits:
            raise SeqlabError(
                f"{translator.cfg.data.dataset} has no {split!r} split; choose from "
                f"{', '.join(splits)}"
            )
        sources, references = [s for s, _ in splits[split]], [t for _, t in splits[split]]
        source = {"split": split}
    # --src: unknown tokens reported above, by line; a split: the run's own data
    with quiet_unknown(), own_data() if not files else contextlib.nullcontext():
        scores = translator.score(sources, references, **options, engine=engine, quantize=quantize)
    outputs = scores.pop("translations")
    decode = decode_options(translator.cfg.decode, beam, None, length_penalty)
    scores["beam_size"] = decode.beam_size if decode.strategy == "beam" else 1
    if decode.strategy == "beam":
        scores["length_penalty"] = decode.length_penalty
    report = TranslationReport(translator.checkpoint, source, scores, outputs=outputs)
    report.check_finite()
    if output:
        atomic_write_text(output, "".join(o + "\n" for o in outputs))
    return report
