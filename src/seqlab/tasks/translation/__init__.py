"""Translation: parallel data, encoder–decoder models, decoding, BLEU.

Evaluation follows the field's convention: hypotheses are detokenised and scored against the raw
reference sentences with sacreBLEU (cased, 13a tokenisation), whose signature is reported; chrF
alongside. The score the Multi30k papers report — lowercased, punctuation-normalised,
Moses-tokenised text, ``multi-bleu.perl`` style — is given too as ``bleu_paper`` with its own
signature (:mod:`seqlab.tasks.paper_bleu`); it is not comparable with cased detokenised BLEU.
``bleu_lc`` (sacreBLEU of the same detokenised text, lowercased) stays in the JSON for older
readers; it is neither the headline nor the papers' scale.

**Decoding options** (:class:`TranslateOptions`, :class:`DecodeOptions`): the run's ``decode``
section, changed by ``beam``, ``nbest`` and ``length_penalty``, declared once for the command
line, the Python API and the server (:mod:`~seqlab.tasks.translation.options` says how they
combine).

A run directory holds ``src_vocab.json``, ``tgt_vocab.json``, ``src_tokenizer.json`` and
``tgt_tokenizer.json`` (with ``*.spm.model`` for subwords) besides the config and checkpoints;
:meth:`Translator.load` needs nothing else. **Engines**: seqlab's own search (``seqlab``; ``pytorch``
is its deprecated name) or the model exported to CTranslate2, under the rules of :func:`check_engine`
(:mod:`~seqlab.tasks.translation.engines` holds their names).

**Layout**: :mod:`~seqlab.tasks.translation.translator` (the predictor, :class:`Translator`),
:mod:`~seqlab.tasks.translation.translation_model` (what it extends: the model, its
vocabularies and engines), :mod:`~seqlab.tasks.translation.scorer` (what it scores with),
:mod:`~seqlab.tasks.translation.engines` (the :class:`~seqlab.tasks.translation.engines.Engine`
protocol and seqlab's own search), :mod:`~seqlab.tasks.translation.ctranslate2_engine`
(CTranslate2 and its export cache), :mod:`~seqlab.tasks.translation.decoding` (decoding options,
n-best hypotheses, ``seqlab translate``'s output), :mod:`~seqlab.tasks.translation.scoring`
(BLEU, chrF, ``score``, ``evaluate``), :mod:`~seqlab.tasks.translation.attention` (a
translation's attention read back),
:mod:`~seqlab.tasks.translation.ensemble` (which runs join an ensemble),
:mod:`~seqlab.tasks.translation.figures` (attention heatmaps),
:mod:`~seqlab.tasks.translation.options` (the command-line options),
:mod:`~seqlab.tasks.translation.artefacts` (what a run directory holds),
:mod:`~seqlab.tasks.translation.task` (rules, loss, validation, the experiment),
:mod:`~seqlab.tasks.translation.service` (``POST /translate``) and ``panel.js`` (the page's
panel); the task is declared once, below (:data:`TASK`). Every name is importable from
``seqlab.tasks.translation`` itself.
"""

from seqlab import catalog
from seqlab.config.experiment import TASK_RULES
from seqlab.tasks.translation.artefacts import (
    ARTEFACTS,
    Pairs,
    _sizes,
    _splits,
    load_pairs,
    load_vocabs,
    save_vocabs,
)
from seqlab.tasks.translation.attention import TranslationAttention
from seqlab.tasks.translation.decoding import (
    MAX_LENGTH_PENALTY,
    Sentence,
    Translations,
    as_sentences,
    decode_options,
)
from seqlab.tasks.translation.engines import (
    AUTO,
    CTRANSLATE2,
    ENGINE_SPELLINGS,
    ENGINES,
    SEQLAB,
    SERVER_ENGINES,
    Engine,
    SeqlabSearch,
    check_engine,
    ctranslate2_refusal,
    engine_decodes,
    engine_name,
)
from seqlab.tasks.translation.ensemble import Member
from seqlab.tasks.translation.figures import MAX_PLOT_TOKENS
from seqlab.tasks.translation.options import DecodeOptions, TranslateOptions
from seqlab.tasks.translation.scoring import TranslationReport, paper_lang, score_translations
from seqlab.tasks.translation.service import SERVICE
from seqlab.tasks.translation.task import (
    SELECT,
    build_experiment,
    translation_loss,
    validation,
)
from seqlab.tasks.translation.translator import Translator

TASK = catalog.register_task(
    catalog.TaskSpec(
        "translation",
        build_experiment,
        (Translator,),
        SELECT,
        frozenset(ARTEFACTS),
        rules=TASK_RULES["translation"],  # config checks, with the config (seqlab.config)
        service=SERVICE,
        summary="a sentence in one language to a sentence in another",
    )
)

__all__ = [
    "ARTEFACTS",
    "AUTO",
    "CTRANSLATE2",
    "ENGINES",
    "ENGINE_SPELLINGS",
    "MAX_LENGTH_PENALTY",
    "MAX_PLOT_TOKENS",
    "SELECT",
    "SEQLAB",
    "SERVER_ENGINES",
    "SERVICE",
    "TASK",
    "DecodeOptions",
    "Engine",
    "Member",
    "Pairs",
    "Sentence",
    "SeqlabSearch",
    "TranslateOptions",
    "TranslationAttention",
    "TranslationReport",
    "Translations",
    "Translator",
    "_sizes",
    "_splits",
    "as_sentences",
    "build_experiment",
    "check_engine",
    "ctranslate2_refusal",
    "decode_options",
    "engine_decodes",
    "engine_name",
    "load_pairs",
    "load_vocabs",
    "paper_lang",
    "save_vocabs",
    "score_translations",
    "translation_loss",
    "validation",
]
