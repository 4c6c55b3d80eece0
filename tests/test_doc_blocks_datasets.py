"""Docs that cannot rot, the pages whose blocks need Multi30k, Tatoeba or FSDD
(``doc_blocks.DATASET_PAGES``): each shell and Python block runs, at a tiny budget, when
``$SEQLAB_DATA_DIR`` holds the datasets (tests/doc_blocks.py; the other pages: test_doc_blocks.py).
"""

from __future__ import annotations

import pytest

import doc_blocks as D

ALL = D.all_blocks()
BLOCKS = [b for b in ALL if b.page in D.DATASET_PAGES]
pages = D.pages  # the fixture: every page's sandbox, its tiny runs and servers


@pytest.mark.parametrize("block", D.by_tier(BLOCKS), ids=lambda b: b.id)
def test_a_documented_block_runs(block, pages):
    D.run_or_skip(block, pages)
