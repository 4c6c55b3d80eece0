"""Shared test setup: offline, deterministic, one thread per test worker."""

import os

import pytest
import torch

os.environ.setdefault("SEQLAB_OFFLINE", "1")
torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield
