"""Paper-style BLEU: the lowercased, Moses-tokenised BLEU that the Multi30k literature reports.

Multi30k papers (Elliott et al. 2016; the WMT multimodal shared tasks) score translations against
the dataset's ``*.lc.norm.tok.*`` files with Moses' ``multi-bleu.perl``. Those files were made by
the dataset's ``scripts/task1-tokenize.sh`` with the Moses scripts of commit 3a0631a::

    lowercase.perl | normalize-punctuation.perl -l $LANG | tokenizer.perl -l $LANG

no aggressive hyphen splitting (``-a`` is not given: "saftig-grünes" stays one token) and the
tokeniser's default XML escaping (``'`` → ``&apos;``, ``"`` → ``&quot;``). :func:`moses_lc_norm_tok`
applies the same three steps to any text with sacremoses (the maintained Python port), and
:func:`paper_bleu` scores hypotheses and references prepared that way with sacreBLEU, which adds
no tokenisation of its own (``tok:none``), no smoothing (``smooth:none``) — what
``multi-bleu.perl`` computes on tokenised files.

Two details make sacremoses reproduce the dataset's files line for line (1,000 of 1,000 lines of
test_2016_flickr, 1,014 of val and 29,000 of train, in en, de and fr):

* ``perl_parity=True``: Moses 3a0631a maps ``’`` to ``"``, which sacremoses does only then
  (without it, 14 French training lines and one each of German train and French val differ).
* Each line gets its newline back before normalisation. The Perl script reads lines with the
  newline, and its German/French rule ``(\\.+)"(\\s*[^<])`` → ``"$1$2`` moves a sentence-final
  period out of closing quotes only because ``[^<]`` matches that newline
  (``… arbeitnehmer."`` → ``… arbeitnehmer &quot; .``). Without it 6 German and 4 French
  training lines, one German val line and one French test line differ.

Left as sacremoses has it (none in train, val or test_2016_flickr): a ``‘`` or ``‚`` that is not
between two letters becomes ``'``, where Moses 3a0631a writes ``"``.

The sacreBLEU score of cased, detokenised text (``bleu``) stays the headline; this number is for
comparing with published Multi30k results, always printed with its signature.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from importlib.metadata import version
from typing import Any, NamedTuple

from seqlab.errors import SeqlabError

MOSES_COMMIT = "3a0631a"  # the Moses scripts the Multi30k repository ships and used


@lru_cache(maxsize=8)
def _moses(lang: str) -> tuple[Any, Any]:
    from sacremoses import MosesPunctNormalizer, MosesTokenizer

    return MosesPunctNormalizer(lang=lang, perl_parity=True), MosesTokenizer(lang=lang)


def moses_lc_norm_tok(sentences: Sequence[str], lang: str) -> list[str]:
    """Each sentence lowercased, punctuation-normalised and Moses-tokenised for ``lang``.

    The ``*.lc.norm.tok.<lang>`` preprocessing of Multi30k (see the module docstring); tokens are
    joined by single spaces, special characters XML-escaped as ``tokenizer.perl`` does.
    """
    normalizer, tokenizer = _moses(lang)
    return [
        tokenizer.tokenize(normalizer.normalize(s.lower() + "\n"), return_str=True, escape=True)
        for s in sentences
    ]


class PaperBleu(NamedTuple):
    """A paper-style BLEU score and the signature that says how it was computed."""

    score: float
    signature: str


def paper_bleu(hypotheses: Sequence[str], references: Sequence[str], lang: str) -> PaperBleu:
    """Corpus BLEU (Papineni et al. 2002) of detokenised ``hypotheses`` against one reference
    each, both put through :func:`moses_lc_norm_tok` for ``lang`` first: ``multi-bleu.perl`` on
    the Multi30k ``lc.norm.tok`` files (no smoothing, so 0 when some n-gram order has no match).

    The signature extends sacreBLEU's with the preprocessing, e.g.
    ``moses:lc+norm+tok|lang:de|moses-scripts:3a0631a|sacremoses:0.2.0|nrefs:1|case:lc|eff:no|``
    ``tok:none|smooth:none|version:2.6.0``.
    """
    from sacrebleu.metrics import BLEU

    if len(hypotheses) != len(references):
        raise SeqlabError(
            f"{len(hypotheses)} hypotheses but {len(references)} references; they must pair up"
        )
    hyps = moses_lc_norm_tok(hypotheses, lang)
    refs = moses_lc_norm_tok(references, lang)
    # The text is lowercase already (so case:lc is true); force: tokenised input is intended.
    bleu = BLEU(lowercase=True, tokenize="none", smooth_method="none", force=True)
    score = bleu.corpus_score(hyps, [refs]).score
    pre = (
        f"moses:lc+norm+tok|lang:{lang}|moses-scripts:{MOSES_COMMIT}|"
        f"sacremoses:{version('sacremoses')}"
    )
    return PaperBleu(score, f"{pre}|{bleu.get_signature()}")
