"""Scoring translations: sacreBLEU BLEU and chrF with their signatures, the paper-style BLEU
(:func:`score_translations`), the pairs :meth:`~seqlab.tasks.translation.Translator.score`
takes (:func:`check_pairs`), and ``seqlab evaluate`` (:func:`evaluate`,
behind :meth:`~seqlab.tasks.translation.Translator.evaluate`)."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from seqlab import catalog
from seqlab.atomic import atomic_write_text
from seqlab.config import DecodeConfig, ExperimentConfig
from seqlab.data.vocab import quiet_unknown, warn_unknown
from seqlab.errors import SeqlabError
from seqlab.storage.outputs import api_output_file
from seqlab.storage.text import own_data, read_lines
from seqlab.tasks.paper_bleu import paper_bleu
from seqlab.tasks.report import Report
from seqlab.tasks.translation import artefacts
from seqlab.tasks.translation.decoding import as_sentences
from seqlab.tasks.translation.engines import SEQLAB
from seqlab.tasks.translation.options import DecodeOptions


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


def check_pairs(sources: Sequence[str], references: Sequence[str]) -> None:
    """Sources and references that pair up: lists of sentences, at least one, as many of each
    (:meth:`~seqlab.tasks.translation.Translator.score`)."""
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
    split: str | None,
    files: Mapping[str, str],
    options: Any,
    decode: DecodeConfig,
    engine: Mapping[str, Any],
    output: str | Path | None = None,
    force: bool = False,
) -> TranslationReport:
    """BLEU, chrF and paper-style BLEU on a ``split`` of the run's dataset (reads the data) or
    on ``files={"src": FILE, "ref": FILE}``, translated by ``translator`` (a
    :class:`~seqlab.tasks.translation.Translator`) with the decoding ``options`` (checked, and
    worked out as ``decode``) on ``engine`` (``{"engine": ..., "quantize": ...}``); ``output``:
    also write the translations there (atomically), by the rule of ``--output``
    (:func:`seqlab.storage.outputs.output_file`: a file seqlab did not write is refused before any
    work unless ``force``). Unknown tokens of ``src`` are reported by
    ``FILE:LINE`` (those of the run's own data are not: its vocabulary was built leaving them
    out). :meth:`~seqlab.tasks.translation.Translator.evaluate` calls this."""
    read = {f"--{k}": v for k, v in files.items()}
    written = api_output_file(output, "output", force, read)  # checked now, before any work
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
        scores = translator.score(sources, references, options, **engine)
    outputs = scores.pop("translations")
    scores["beam_size"] = decode.beam_size if decode.strategy == "beam" else 1
    if decode.strategy == "beam":
        scores["length_penalty"] = decode.length_penalty
    report = TranslationReport(translator.checkpoint, source, scores, outputs=outputs)
    report.check_finite()
    if output:
        with written:
            atomic_write_text(output, "".join(o + "\n" for o in outputs))
    return report


class Scoring:
    """A :class:`~seqlab.tasks.translation.Translator`'s best translations and their scores:
    the methods of the predictor that score (``self`` is the translator)."""

    def translate(
        self: Any,
        sentences: Sequence[str] | str,
        options: DecodeOptions | None = None,
        *,
        batch_size: int = 128,
        engine: str = SEQLAB,
        quantize: str | None = None,
        **keywords: Any,
    ) -> Any:
        """The best translation of each sentence (``options``, or ``beam=``,
        ``length_penalty=``: :class:`~seqlab.tasks.translation.options.DecodeOptions`; None =
        the run's ``decode``): a list for a list of sentences, a string for one sentence."""
        texts, single = as_sentences(sentences)
        chosen = self.options_of("evaluate", options, keywords)
        found = self.hypotheses(
            texts,
            self.command_options["translate"].of({**chosen.given(), "nbest": 1}),
            batch_size=batch_size,
            engine=engine,
            quantize=quantize,
        )
        outputs = [self.detokenize(h[0].tokens) for h in found]
        return outputs[0] if single else outputs

    def score(
        self: Any,
        sources: Sequence[str],
        references: Sequence[str],
        options: DecodeOptions | None = None,
        *,
        engine: str = SEQLAB,
        quantize: str | None = None,
        **keywords: Any,
    ) -> dict[str, Any]:
        """Translate ``sources`` and score them against ``references``: BLEU, chrF, …, and the
        outputs (key ``translations``). Both are lists of sentences, at least one."""
        check_pairs(sources, references)
        chosen = self.options_of("evaluate", options, keywords)
        outputs = self.translate(sources, chosen, engine=engine, quantize=quantize)
        scores = score_translations(outputs, references, paper_lang(self.cfg))
        return {**scores, "translations": outputs}

    def evaluate(
        self: Any,
        split: str | None = None,
        files: Mapping[str, str | Path] | None = None,
        options: DecodeOptions | None = None,
        *,
        engine: str = SEQLAB,
        quantize: str | None = None,
        output: str | Path | None = None,
        force: bool = False,
        **keywords: Any,
    ) -> TranslationReport:
        """BLEU, chrF and paper-style BLEU on a ``split`` of the run's dataset (default ``val``)
        or on ``files={"src": FILE, "ref": FILE}`` (``options``, or ``beam=``,
        ``length_penalty=``); ``output``: also write the translations there (atomically; a file
        seqlab did not write only with ``force``): :func:`evaluate`."""
        chosen = self.options_of("evaluate", options, keywords)
        decode = self.decoding(chosen)
        self.check_use(engine, quantize)
        split, files = self._source(split, files, "val")
        return evaluate(
            self,
            split,
            files,
            chosen,
            decode,
            {"engine": engine, "quantize": quantize},
            output,
            force,
        )
