"""nn.dropout: inverted dropout with the mask drawn from uniform numbers."""

import pytest
import torch

from devices import DEVICES
from seqlab.nn.dropout import Dropout


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_each_element_is_dropped_with_probability_p_and_the_rest_scaled(dtype, device):
    torch.manual_seed(0)
    x = (torch.rand(200_000, dtype=torch.float64) + 0.5).to(device, dtype).requires_grad_()
    p = 0.3
    y = Dropout(p).train()(x)
    assert y.dtype == dtype
    kept = y != 0
    # a Binomial(n, p) count of dropped elements: within 5 standard deviations of n p
    n = x.numel()
    assert abs(int((~kept).sum()) - n * p) < 5 * (n * p * (1 - p)) ** 0.5
    scale = torch.tensor(1 / (1 - p), dtype=dtype, device=device)
    torch.testing.assert_close(y[kept], x[kept].detach() * scale, atol=0, rtol=0)
    y.sum().backward()
    assert torch.equal(x.grad[kept], scale.expand(int(kept.sum())))
    assert not x.grad[~kept].any()


@pytest.mark.parametrize("device", DEVICES)
def test_eval_mode_and_p_zero_are_the_identity_and_p_one_drops_all(device):
    x = torch.randn(4, 5).to(device).requires_grad_()
    assert Dropout(0.5).eval()(x) is x and Dropout(0.0).train()(x) is x
    y = Dropout(1.0).train()(x)
    assert not y.any()
    y.sum().backward()
    assert not x.grad.any()
    for p in (-0.1, 1.5):
        with pytest.raises(ValueError, match=r"dropout probability must be in \[0, 1\]"):
            Dropout(p)


@pytest.mark.parametrize("device", DEVICES)
def test_the_masks_follow_the_seed(device):
    x = torch.ones(1000, device=device)
    torch.manual_seed(3)
    a = Dropout(0.5).train()(x)
    torch.manual_seed(3)
    assert torch.equal(Dropout(0.5).train()(x), a) and not torch.equal(Dropout(0.5).train()(x), a)
