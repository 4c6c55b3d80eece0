"""Scoring translations: sacreBLEU BLEU and chrF with their signatures, the paper-style BLEU
(:func:`score_translations`), the pairs :meth:`~seqlab.tasks.translation.Translator.score`
takes (:func:`check_pairs`), and what ``seqlab evaluate`` scores (:class:`EvaluationSet`,
read and reported by :meth:`~seqlab.tasks.translation.Translator.evaluate`). A translator's
:class:`~seqlab.tasks.translation.scorer.Scorer` scores with them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from seqlab import catalog
from seqlab.config import DecodeConfig, ExperimentConfig
from seqlab.data.vocab import warn_unknown
from seqlab.errors import SeqlabError
from seqlab.storage.text import read_lines
from seqlab.tasks.paper_bleu import paper_bleu
from seqlab.tasks.report import Report
from seqlab.tasks.translation import artefacts
from seqlab.tasks.translation.decoding import SourceReader, as_sentences

#: target languages the paper-style BLEU applies to: Moses' tokenizer and punctuation rules for
#: them (multi-bleu.perl on the Multi30k papers' lc.norm.tok files); not Chinese
PAPER_LANGS = ("en", "de", "fr")


def paper_lang(cfg: ExperimentConfig) -> str | None:
    """The target language for the paper-style BLEU, or None where it does not apply (generated
    strings, a language Moses does not tokenise)."""
    spec = catalog.datasets()[cfg.data.dataset]
    lang = cfg.data.tgt_lang
    return lang if spec.natural_language and lang in PAPER_LANGS else None


def bleu_tokenizer(lang: str | None) -> str:
    """sacreBLEU's tokenizer for output in ``lang``: ``zh`` for Chinese (each Chinese character a
    token, as WMT scores Chinese), ``13a`` (its default, mteval's) for every other."""
    return "zh" if lang == "zh" else "13a"


def score_translations(
    hypotheses: Sequence[str],
    references: Sequence[str],
    lang: str | None = None,
    target: str | None = None,
) -> dict[str, Any]:
    """sacreBLEU BLEU and chrF (cased, detokenised) with signatures, lowercased BLEU, and with
    the target language ``lang`` the paper-style BLEU (``bleu_paper``, see
    :mod:`seqlab.tasks.paper_bleu`). BLEU tokenises by the output's language ``target``
    (:func:`bleu_tokenizer`: ``zh`` for Chinese; the signature says ``tok:zh``)."""
    from sacrebleu.metrics import BLEU, CHRF

    tokenize = bleu_tokenizer(target if target is not None else lang)
    bleu, chrf = BLEU(tokenize=tokenize), CHRF()
    bleu_lc = BLEU(lowercase=True, tokenize=tokenize)
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


@dataclass(frozen=True)
class EvaluationSet:
    """What ``seqlab evaluate`` scores: source sentences and their references, from a split of
    the run's dataset or from ``--src``/``--ref`` (``source``: ``{"split": ...}`` or the
    files, as the report names them)."""

    sources: list[str]
    references: list[str]
    source: dict[str, str]

    @property
    def own(self) -> bool:
        """Whether these are the run's own data (a split), read by its dataset's rules."""
        return "split" in self.source

    @classmethod
    def read(
        cls,
        cfg: ExperimentConfig,
        split: str | None,
        files: Mapping[str, str],
        reader: SourceReader,
    ) -> EvaluationSet:
        """A ``split`` of the dataset of ``cfg`` (reads the data) or ``files={"src": FILE,
        "ref": FILE}``, whose unknown tokens (by ``reader``, the source vocabulary's) are
        reported by ``FILE:LINE`` (those of the run's own data are not: its vocabulary was built
        leaving them out)."""
        if not files:
            assert split is not None
            splits = artefacts.load_pairs(cfg)  # the module's name: tests replace it
            if split not in splits:
                raise SeqlabError(
                    f"{cfg.data.dataset} has no {split!r} split; choose from {', '.join(splits)}"
                )
            pairs = splits[split]
            return cls([s for s, _ in pairs], [t for _, t in pairs], {"split": split})
        if set(files) != {"src", "ref"}:
            raise SeqlabError(
                "--src and --ref go together: the source sentences and their references"
            )
        sources, references = read_lines(files["src"], "--src"), read_lines(files["ref"], "--ref")
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
        lines = enumerate(sources, start=1)
        warn_unknown(((f"{files['src']}:{n}", reader.read(s).unknown) for n, s in lines), 2)
        return cls(sources, references, dict(files))

    def report(
        self, checkpoint: str | None, scores: dict[str, Any], decode: DecodeConfig
    ) -> TranslationReport:
        """The report of ``scores`` (:meth:`~seqlab.tasks.translation.scorer.Scorer.score`'s,
        with its ``translations``) of the checkpoint ``checkpoint`` decoding by ``decode``,
        checked to hold finite numbers."""
        scores = dict(scores)
        outputs = scores.pop("translations")
        scores["beam_size"] = decode.beam_size if decode.strategy == "beam" else 1
        if decode.strategy == "beam":
            scores["length_penalty"] = decode.length_penalty
        report = TranslationReport(checkpoint, self.source, scores, outputs=outputs)
        report.check_finite()
        return report
