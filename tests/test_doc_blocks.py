"""Docs that cannot rot: every shell and Python block of README.md and of the docs site's pages
runs, at a tiny budget, in page order (tests/doc_blocks.py: how, and the comments that steer a
block). docs/tutorials/ runs in its own test; the pages whose blocks need Multi30k, Tatoeba or
FSDD run in test_doc_blocks_datasets.py.

Also here: the harness finds every block, applies each smoke comment where it says, reports a
failing block by its page, line, command and output, and skips only the blocks listed below.
"""

from __future__ import annotations

import re

import pytest
import yaml

import doc_blocks as D

ALL = D.all_blocks()
BLOCKS = [b for b in ALL if b.page not in D.DATASET_PAGES]
pages = D.pages  # the fixture: every page's sandbox, its tiny runs and servers
DEMO = "        # the main job, offline: translate written dates to ISO dates (two models)"
#: the blocks not run (<!-- smoke-skip: REASON -->), by page and first line
SKIPPED = {
    ("README.md", f"make demo{DEMO}"),
    ("README.md", "$ make demo"),
    ("docs/index.md", f"make demo{DEMO}"),
    ("docs/index.md", "$ make demo"),
    ("docs/howto/distributed.md", "# machine 0"),
    ("docs/design/extending.md", "TASK = catalog.register_task("),
    (
        "docs/howto/audio.md",
        "SEQLAB_DATA_DIR=../shared/data .venv/bin/python benchmarks/fsdd_speakers.py \\",
    ),
}


@pytest.mark.parametrize("block", D.by_tier(BLOCKS), ids=lambda b: b.id)
def test_a_documented_block_runs(block, pages):
    D.run_or_skip(block, pages)


# ------------------------------------------------------------------------------ the harness
def test_every_shell_and_python_block_of_the_pages_is_found():
    """Counted again line by line: a fence opens a block, the next fence closes it."""
    expected = []
    for path in D.documents():
        page, opened = str(path.relative_to(D.ROOT)), None
        for number, line in enumerate(path.read_text(encoding="utf-8").split("\n"), 1):
            if line.startswith("```"):
                if opened is None:
                    opened = line[3:].strip().lower()
                    if opened in D.SHELL | D.PYTHON:
                        expected.append(f"{page}:{number + 1}")
                else:
                    opened = None
    assert [b.id for b in ALL] == expected
    assert len(ALL) >= 30
    assert {"README.md", "docs/howto/own-data.md", "docs/results.md"} <= {b.page for b in ALL}
    assert not any("tutorials" in b.page for b in ALL)
    assert set(D.DATASET_PAGES) <= {b.page for b in ALL}


def test_only_these_blocks_are_skipped_each_saying_why():
    skipped = {(b.page, b.code.split("\n")[0]): b.skip for b in ALL if b.skip is not None}
    assert set(skipped) == SKIPPED
    for (page, first), reason in skipped.items():
        assert len(reason.split()) >= 6, f"{page}: {first}: say why it cannot run here"


def test_each_smoke_comment_changes_its_block():
    """A comment that matches nothing in its block (a renamed command, a moved port) fails
    here, with or without the datasets."""
    for block in ALL:
        if block.skip is not None or not block.directives:
            continue
        code = D.substitute(block, block.runnable())  # each OLD is in the block
        if block.one("smoke-train") and block.lang in D.PYTHON:
            assert 'main(["train", ' in code, block.id
        elif block.one("smoke-train"):
            assert D.with_train_args(code, block.one("smoke-train")) != code, block.id
        if block.one("smoke"):
            assert D.hook().with_args(code, block.one("smoke")) != code, block.id
        if block.one("smoke-port"):
            assert D.with_port(code, block.one("smoke-port"), 1) != code, block.id


def test_the_runs_the_tests_train_are_valid_configs(tmp_path):
    from seqlab.config import load_config

    for name, text in D.blocks_of(D.ROOT / "docs/howto/own-data.md")[1].items():
        (tmp_path / name).write_text(text)
    for run, command in D.RUNS.items():
        _, _, config, *overrides = command.split()
        path = D.ROOT / config if config.startswith("configs/") else tmp_path / config
        cfg = load_config(str(path), overrides)
        assert cfg.train.max_steps or cfg.train.epochs <= 2, run  # a tiny budget


def test_the_rewrites_keep_each_command_on_its_line():
    train = D.with_train_args(
        "seqlab train c.yaml a=1 --out runs/x   # note\n"
        "seqlab train c.yaml \\\n    --out runs/y\n"
        "torchrun --nproc_per_node=2 -m seqlab train c.yaml --out runs/z\n"
        "seqlab train --resume runs/x a=2\n"
        "seqlab evaluate --run runs/x",
        "k=2",
    )
    assert train.split("\n") == [
        "seqlab train c.yaml a=1 k=2 --out runs/x   # note",
        "seqlab train c.yaml k=2 \\",
        "    --out runs/y",
        "torchrun --nproc_per_node=2 -m seqlab train c.yaml k=2 --out runs/z",
        "seqlab train --resume runs/x a=2",
        "seqlab evaluate --run runs/x",
    ]
    served = D.with_servers(
        D.with_port(
            "seqlab serve runs/a &   # http://127.0.0.1:8000/\n"
            "seqlab serve runs/b --port 8000\n"
            "curl -s localhost:8000/health",
            "8000",
            4321,
        )
    )
    assert served.split("\n") == [
        "smoke_serve runs/a --port 4321   # http://127.0.0.1:4321/",
        "smoke_serve_fg runs/b --port 4321",
        "curl -s localhost:4321/health",
    ]
    with pytest.raises(ValueError, match="only seqlab serve may run in the background"):
        D.with_servers("sleep 100 &")
    assert D.console_to_script("$ a \\\n  b\nprinted\n$ c") == "a \\\n  b\n\nc"
    assert D.doctest_to_script(">>> f(\n... 1)\n2\n...\n>>> g()") == "f(\n1)\n\n\ng()"


PAGE = """# A page

Some text.

```sh
echo fine
seqlab export --format ctranslate2 --run nothing --out runs/a \\
    --quantise int8
echo never
```

```python
>>> import json
>>> json.loads("[1]")
[1]
>>> json.loads("[2")
```

```sh
ls runs/a
```
"""


def test_a_failing_block_names_its_page_line_command_and_output(tmp_path):
    """The mutation check: a renamed flag (``--quantise``) in a shell block, bad input in a Python
    block; each fails naming the page's line, the command and what it printed; a block that
    reads what a failed block writes fails too, naming it."""
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    blocks, files = D.blocks_of(page)
    ran = D.Page(str(page), blocks, files, tmp_path / "sandbox", D.Runs(tmp_path / "runs"))
    with pytest.raises(D.BlockFailed) as failed:
        ran.run_through(0)
    message = str(failed.value)
    assert message.startswith(f"{page}:7: seqlab export --format ctranslate2 --run nothing")
    assert message.split("\n")[1] == "    --quantise int8"
    assert "exited 2" in message and "unrecognized arguments: --quantise int8" in message
    assert "the end of its output:\nfine\n" in message

    with pytest.raises(D.BlockFailed) as failed:  # it does not need the shell block
        ran.run_through(1)
    message = str(failed.value)
    assert message.startswith(f'{page}:16: >>> json.loads("[2")\nexited 1')
    assert "json.decoder.JSONDecodeError: Expecting ',' delimiter" in message

    with pytest.raises(D.BlockFailed, match=re.escape(f"{page}:20 needs {page}:6, which failed")):
        ran.run_through(2)

    page.write_text(PAGE.replace("--quantise int8", "--help >/dev/null; mkdir -p runs/a"))
    blocks, files = D.blocks_of(page)
    ran = D.Page(str(page), blocks, files, tmp_path / "again", D.Runs(tmp_path / "runs"))
    assert ran.run_through(0) == "ok"
    assert ran.run_through(2) == "ok"


def test_a_yaml_block_that_names_its_file_is_written_for_the_page():
    _, files = D.blocks_of(D.ROOT / "docs/howto/own-data.md")
    assert set(files) == {"my-lm.yaml", "reviews.yaml", "demand.yaml"}
    for text in files.values():
        assert yaml.safe_load(text)["data"]["path"] in D.FILES
