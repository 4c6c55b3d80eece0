"""Ensembles of translation runs (:meth:`~seqlab.tasks.translation.Translator.ensemble_with`):
which runs may join one —
translation runs with this run's vocabularies and tokenizers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from seqlab.data.translation_batching import TranslationVocabs
from seqlab.data.vocab import Vocab
from seqlab.errors import SeqlabError
from seqlab.storage.rundir import RunDir
from seqlab.tasks.base import Predictor
from seqlab.tasks.translation.artefacts import _splits

#: what :meth:`~seqlab.tasks.translation.Translator.ensemble_with` takes: a run directory or a
#: loaded run
Member = str | Path | Predictor
_NOT_A_MEMBER = (
    "ensemble_with takes run directories (str or Path) or translators that seqlab.load returned"
)


@dataclass(frozen=True)
class Joining:
    """What a run must share to join this run in an ensemble (see
    :meth:`~seqlab.tasks.translation.Translator.ensemble_with`): its kind of predictor (``kind``),
    its vocabularies and tokenizers (``vocabs``); ``mine`` names this run in messages."""

    kind: type[Predictor]
    vocabs: TranslationVocabs
    mine: str

    def members(
        self,
        others: Member | Sequence[Member],
        names: Sequence[str] | None = None,
        which: str = "best",
    ) -> list[Any]:
        """The translators ``others`` name (run directories loaded at ``which``, or loaded
        runs), each checked to join this run; named ``names`` in messages (default: their run
        directories). A run directory is opened here and loaded as :attr:`kind`
        (:meth:`~seqlab.tasks.base.Predictor.load`), after its config says it is one (the task
        registry, :mod:`seqlab.tasks`, imports this package)."""
        given = [others] if isinstance(others, str | Path | Predictor) else others
        if not isinstance(given, Sequence):
            raise TypeError(_NOT_A_MEMBER + f", or a list of them; got {type(others).__name__}")
        for item in given:
            if not isinstance(item, str | Path | Predictor):
                raise TypeError(_NOT_A_MEMBER + f"; got {type(item).__name__} in the list")
        if names is None:
            names = [
                str(o) if not isinstance(o, Predictor) else str(o.run.run_dir) if o.run else repr(o)
                for o in given
            ]
        if len(names) != len(given):
            raise SeqlabError(f"ensemble_with: {len(names)} names for {len(given)} runs")
        members: list[Any] = [
            o if isinstance(o, Predictor) else _load(o, which, self.kind, n)
            for o, n in zip(given, names, strict=True)
        ]
        for other, name in zip(members, names, strict=True):
            if not isinstance(other, self.kind):
                raise SeqlabError(_not_a_translation(name, other.kind, other.cfg.model.arch))
            self._check_shared(other.vocabs, name)
        return members

    def _check_shared(self, theirs: TranslationVocabs, name: str) -> None:
        """The vocabularies and tokenizers of the run ``name`` are this run's."""
        for side in ("src", "tgt"):
            their_vocab: Vocab = getattr(theirs, f"{side}_vocab")
            our_vocab: Vocab = getattr(self.vocabs, f"{side}_vocab")
            if their_vocab.idx_to_token != our_vocab.idx_to_token:
                raise SeqlabError(
                    f"--ensemble {name}: its {side}_vocab.json differs from {self.mine}'s "
                    f"({len(their_vocab)} tokens against {len(our_vocab)}, or other tokens): the "
                    "models of an ensemble must share their vocabularies"
                )
            if _splits(getattr(theirs, f"{side}_tokenizer")) != _splits(
                getattr(self.vocabs, f"{side}_tokenizer")
            ):
                raise SeqlabError(
                    f"--ensemble {name}: its {side} tokenizer differs from {self.mine}'s: the "
                    "models of an ensemble must split text the same way"
                )


def _load(run_dir: str | Path, which: str, kind: type[Predictor], name: str) -> Predictor:
    """The run in ``run_dir`` at checkpoint ``which``, loaded as ``kind`` once its config says it
    is a run of that kind."""
    run = RunDir(run_dir).open(which)
    if not kind.accepts(run.cfg) or run.cfg.task != kind.task:
        raise SeqlabError(
            _not_a_translation(name, run.cfg.task.replace("_", " "), run.cfg.model.arch)
        )
    return kind.load(run)


def _not_a_translation(name: str, kind: str, arch: str) -> str:
    return (
        f"--ensemble {name}: holds {kind} model (model.arch={arch}); an ensemble takes "
        "translation runs only"
    )
