"""Renamed names: the one table of old option values, and old keyword arguments kept working.

Option values are named by what they compute. Values renamed since a configuration may have been
written (a YAML in a user's hands, a trained run's ``config.yaml``) still load: the old value is
replaced by the new one with one warning per process,
``model.cell=<old> is deprecated; use model.cell=<new>``, which the command line prints as
``seqlab: warning: …``. :data:`RENAMED_VALUES` is the only place the old values are written; renamed keys
(``model.positional`` → ``model.positions``) are read the same way from :data:`RENAMED_KEYS`.

Command-line flags renamed to one name per concept (a run directory is ``--run``, a figure file
``--png``, values ahead ``--horizon``) still parse, hidden from ``--help``, as the new flag, with one
warning per process, ``seqlab forecast --steps is deprecated; use --horizon``:
:data:`RENAMED_FLAGS` is the only place the old flags are written (the parsers take them from it:
:func:`seqlab.cli.common.add_renamed_flags`). An old flag and its new name given together
(``--horizon 4 --steps 3``) is an error naming both (:func:`flags_given_together`), as an old key
and its new name in one config file is.

Keyword arguments renamed to the package's one name per concept (PyTorch's where it has one:
``need_weights``, ``lengths``) keep their old spelling through :func:`renamed_kwargs`, with a
:class:`DeprecationWarning`.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any, TypeVar


class SeqlabDeprecationWarning(FutureWarning):
    """An old option value or name was used; shown to users (a ``FutureWarning``, which Python
    displays by default, unlike ``DeprecationWarning``)."""


#: ``section.key`` -> {old value: new value}
RENAMED_VALUES: dict[str, dict[str, str]] = {
    "model.cell": {"gru_notes": "gru_reset_before", "gated_rnn": "output_gated_rnn"},
    "model.decoder": {"paper": "maxout", "d2l": "linear"},
    # a translation engine (``--engine``, ``engine=``): seqlab's own search has one name
    "engine": {"pytorch": "seqlab"},
}

#: ``section.old_key`` -> ``section.new_key``: the old key is read as the new one
RENAMED_KEYS: dict[str, str] = {
    "model.positional": "model.positions",
}

#: ``seqlab`` command (``data stats``) -> {old flag: new flag}; the old flag parses as the new one
RENAMED_FLAGS: dict[str, dict[str, str]] = {
    "evaluate": {"--checkpoint": "--run", "--plot": "--png", "--confusion-png": "--png"},
    "translate": {"--checkpoint": "--run"},
    "classify": {"--checkpoint": "--run"},
    "forecast": {"--checkpoint": "--run", "--steps": "--horizon"},
    "generate": {"--checkpoint": "--run"},
    "export": {"--checkpoint": "--run"},
    "data stats": {"--plot": "--png"},
    "curves": {"--out": "--png"},
}

_warned: set[tuple[str, str]] = set()


def renamed_flag(command: str, old: str) -> str:
    """The current flag for ``old`` of ``seqlab <command>`` (:data:`RENAMED_FLAGS`), with one
    warning per (command, flag) and process."""
    new = RENAMED_FLAGS[command][old]
    if (command, old) not in _warned:
        _warned.add((command, old))
        warnings.warn(
            f"seqlab {command} {old} is deprecated; use {new}",
            SeqlabDeprecationWarning,
            stacklevel=2,
        )
    return new


def flags_given_together(new: str, given: list[str]) -> str:
    """The error for one option of a command given by more than one of its names
    (``given``: the new flag ``new`` and its old names of :data:`RENAMED_FLAGS`, as typed): one
    value would be dropped, so neither is taken, as a renamed key and its new name in one config
    is refused (:func:`renamed_keys`)."""
    olds = [flag for flag in dict.fromkeys(given) if flag != new]
    names = " and ".join(dict.fromkeys(given))
    what = f"{olds[0]} is the old name" if len(olds) == 1 else f"{' and '.join(olds)} are old names"
    return f"{names} given together: {what} of {new}; give only {new}"


def renamed_value(key: str, value: Any) -> Any:
    """The current name for ``value`` of option ``key`` (``"model.cell"``); an old name is
    replaced, with one warning per (key, value) and process. Anything else is returned as is."""
    renames = RENAMED_VALUES.get(key, {})
    if not isinstance(value, str) or value not in renames:
        return value
    new = renames[value]
    if (key, value) not in _warned:
        _warned.add((key, value))
        warnings.warn(
            f"{key}={value} is deprecated; use {key}={new}", SeqlabDeprecationWarning, stacklevel=2
        )
    return new


def renamed_keys(section: str, data: Any) -> Any:
    """``data`` (a config section as read) with each old key of :data:`RENAMED_KEYS` under
    ``section`` replaced by the new one, with one warning per key and process. Both spellings
    at once is an error naming them."""
    if not isinstance(data, dict):
        return data
    for dotted, new_dotted in RENAMED_KEYS.items():
        where, old = dotted.split(".", 1)
        new = new_dotted.split(".", 1)[1]
        if where != section or old not in data:
            continue
        if new in data:
            raise ValueError(f"{dotted} is the old name of {new_dotted}: give only {new_dotted}")
        data = {(new if k == old else k): v for k, v in data.items()}
        if (dotted, "") not in _warned:
            _warned.add((dotted, ""))
            warnings.warn(
                f"{dotted} is deprecated; use {new_dotted}", SeqlabDeprecationWarning, stacklevel=2
            )
    return data


F = TypeVar("F", bound=Callable[..., Any])


def renamed_attribute(old: str, new: str) -> property:
    """A read-only property ``old`` that returns attribute ``new``, with a ``DeprecationWarning``
    (for ``Batch.src_len`` -> ``Batch.src_lengths`` and the like)."""

    def get(self: Any) -> Any:
        warnings.warn(
            f"{type(self).__name__}.{old} is deprecated; use .{new}",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(self, new)

    return property(get, doc=f"Deprecated name of ``{new}``.")


def renamed_kwargs(**renames: str) -> Callable[[F], F]:
    """Accept each old keyword (``old="new"``) as the new one, with a ``DeprecationWarning``.

    Passing both spellings is a ``TypeError``, as passing one keyword twice is.
    """

    def decorate(func: F) -> F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            for old, new in renames.items():
                if old in kwargs:
                    if new in kwargs:
                        raise TypeError(
                            f"{func.__qualname__}() got both {old}= (deprecated) and {new}="
                        )
                    warnings.warn(
                        f"{func.__qualname__}({old}=...) is deprecated; use {new}=",
                        DeprecationWarning,
                        stacklevel=2,
                    )
                    kwargs[new] = kwargs.pop(old)
            return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate
