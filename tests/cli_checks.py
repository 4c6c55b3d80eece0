"""Checks of the command line's answers shared by the test files: a refusal is exit status 2 with
one ``seqlab: error:`` line and no traceback; a success is exit status 0."""

import os
from pathlib import Path
from typing import Any

import yaml

from seqlab.cli import main
from seqlab.storage.rundir import LOCK_NAME


def fails(capsys: Any, argv: list[Any], *needles: Any) -> Any:
    """Run the CLI; it must exit 2 with one ``seqlab: error:`` naming every needle."""
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    assert code == 2, captured.err
    err = captured.err
    assert err.startswith("seqlab: error:") and "Traceback" not in err, err
    for needle in needles:
        assert str(needle) in captured.err, (needle, captured.err)
    return captured


def succeeds(capsys: Any, argv: list[Any]) -> Any:
    """Run the CLI; it must exit 0. Returns what it printed."""
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured


def write_yaml(path: Path, raw: dict[str, Any]) -> Path:
    """``raw`` written as YAML to ``path``."""
    path.write_text(yaml.safe_dump(raw))
    return path


write_config = write_yaml


def fails_last_line(capsys: Any, argv: list[Any], *needles: Any) -> str:
    """Run the CLI; it must exit 2, its last line one ``seqlab: error:`` naming every needle
    (training's progress lines may come before it). Returns that line."""
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert code == 2, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("seqlab: error:") and "Traceback" not in err, err
    for needle in needles:
        assert str(needle) in last, (needle, err)
    return last


def snapshot(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory`` (the lock file aside) with its bytes."""
    return {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file() and p.name != LOCK_NAME
    }


def users_folder(path: Path, **files: str) -> dict[str, bytes]:
    """A folder of the user's own ``files`` (name: text) at ``path``; returns its snapshot."""
    path.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (path / name).write_text(text)
    return snapshot(path)


def subprocess_env() -> dict[str, str]:
    """The environment for a ``python -m seqlab`` subprocess: offline, one thread."""
    return {**os.environ, "SEQLAB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
