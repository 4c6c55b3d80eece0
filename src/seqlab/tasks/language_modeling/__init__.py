"""Language modelling: next-token prediction on one text, perplexity, generation.

The models share one interface (:class:`seqlab.models.language_model.CausalLM`): their loss,
scoring and generation are written once, whatever the architecture. A run directory holds
``vocab.json`` and ``tokenizer.json`` besides the config and checkpoints;
:meth:`LanguageModel.load` needs nothing else.

**Layout**: :mod:`~seqlab.tasks.language_modeling.task` (the predictor, rules, loss, validation,
the experiment), :mod:`~seqlab.tasks.language_modeling.ngrams` (n-gram baselines on the same
data), :mod:`~seqlab.tasks.language_modeling.service` (``POST /generate``, streamed or not) and
``panel.js`` (the page's panel), :mod:`~seqlab.tasks.language_modeling.options` (``generate``'s
options, declared once); the task is declared once, below (:data:`TASK`).
"""

from seqlab import catalog
from seqlab.config.experiment import TASK_RULES
from seqlab.tasks.language_modeling.ngrams import ngram_models
from seqlab.tasks.language_modeling.options import (
    MAX_GENERATE_TOKENS,
    MAX_TEMPERATURE,
    GenerateOptions,
)
from seqlab.tasks.language_modeling.service import SERVICE
from seqlab.tasks.language_modeling.task import (
    ARTEFACTS,
    SELECT,
    Generation,
    LanguageModel,
    PerplexityReport,
    Sampling,
    build_experiment,
    evaluate_lm,
    lm_loss,
    load_artefacts,
    load_corpus,
)

TASK = catalog.register_task(
    catalog.TaskSpec(
        "language_modeling",
        build_experiment,
        (LanguageModel,),
        SELECT,
        frozenset(ARTEFACTS),
        rules=TASK_RULES["language_modeling"],  # config checks, with the config (seqlab.config)
        service=SERVICE,
        summary="the next token of a text: perplexity and generation",
    )
)

__all__ = [
    "ARTEFACTS",
    "MAX_GENERATE_TOKENS",
    "MAX_TEMPERATURE",
    "SELECT",
    "SERVICE",
    "TASK",
    "GenerateOptions",
    "Generation",
    "LanguageModel",
    "PerplexityReport",
    "Sampling",
    "build_experiment",
    "evaluate_lm",
    "lm_loss",
    "load_artefacts",
    "load_corpus",
    "ngram_models",
]
