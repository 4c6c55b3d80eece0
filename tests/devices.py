"""The devices an equivalence test runs on: ``@pytest.mark.parametrize("device", DEVICES)``.

A test that compares two paths of computation (scratch vs fused, cached vs full, batch of 1 vs N,
seqlab vs CTranslate2, …) takes a ``device`` argument and moves its model and inputs there with
``.to(device)``: the same test then checks the CPU kernels and, where a CUDA device is present, the
CUDA ones (flash / memory-efficient attention, cuDNN RNNs, the CUDA random generator). Without one
the ``cuda`` cases are skipped ("no CUDA device"). Run only them with ``pytest -m cuda``.

The CUDA cases compare in true fp32: cuDNN's RNNs default to TF32 (products rounded to 10 bits,
off by ~1e-4 where these tests allow 1e-5), so importing this module turns TF32 off.

Seeding stays ``torch.manual_seed`` (the autouse fixture of ``conftest.py``), which seeds the CUDA
generators too; inputs drawn from an explicit CPU ``torch.Generator`` are moved with ``.to``.
"""

import pytest
import torch

# true fp32 on CUDA: cuDNN's TF32 default misses the 1e-5 of the equivalence tests
torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_tf32 = False

DEVICES = [
    pytest.param("cpu", id="cpu"),
    pytest.param(
        "cuda",
        id="cuda",
        marks=[
            pytest.mark.cuda,
            pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"),
        ],
    ),
]
