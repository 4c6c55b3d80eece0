"""nn.losses: the padding-aware cross-entropy every sequence model trains with."""

import pytest
import torch
import torch.nn.functional as F

from devices import DEVICES
from seqlab.nn import losses
from seqlab.nn.losses import masked_cross_entropy

ROWS = 64  # rows per piece of the fused loss in these tests


@pytest.mark.parametrize("device", DEVICES)
def test_masked_cross_entropy_ignores_logits_after_length(device):
    logits, targets = torch.randn(3, 5, 7).to(device), torch.randint(0, 7, (3, 5)).to(device)
    lengths = torch.tensor([5, 2, 3], device=device)
    loss, n = masked_cross_entropy(logits, targets, lengths)
    changed, retargeted = logits.clone(), targets.clone()
    changed[1, 2:], changed[2, 3:] = 100.0, -100.0
    retargeted[1, 2:] = 6
    torch.testing.assert_close(masked_cross_entropy(changed, retargeted, lengths)[0], loss)
    rows = [(b, t) for b in range(3) for t in range(int(lengths[b]))]
    expected = torch.stack([F.cross_entropy(logits[b, t], targets[b, t]) for b, t in rows]).mean()
    torch.testing.assert_close(loss, expected)
    assert n == 10


@pytest.mark.parametrize("device", DEVICES)
def test_label_smoothing_mixes_in_the_uniform_distribution(device):
    logits, targets = torch.randn(2, 4, 9).to(device), torch.randint(0, 9, (2, 4)).to(device)
    lengths = torch.tensor([4, 3], device=device)
    eps = 0.1
    smoothed, _ = masked_cross_entropy(logits, targets, lengths, eps)
    nll, _ = masked_cross_entropy(logits, targets, lengths)
    logp = logits.log_softmax(-1)
    valid = torch.arange(4, device=device)[None, :] < lengths[:, None]
    uniform = -logp.mean(-1)[valid].mean()  # cross-entropy against the uniform distribution
    torch.testing.assert_close(smoothed, (1 - eps) * nll + eps * uniform)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fused_loss_and_gradient_equal_pytorchs_cross_entropy(
    smoothing, dtype, monkeypatch, device
):
    """The fused loss (several pieces of ROWS rows) gives F.cross_entropy's value and
    gradient on fp32 logits; on bf16 logits, those of F.cross_entropy on their fp32 copy with the
    gradient rounded back to bf16. Padded positions get an exactly zero gradient."""
    g = torch.Generator().manual_seed(0)
    B, T, V = 5, ROWS + 7, 50
    monkeypatch.setattr(losses, "PIECE_ELEMENTS", ROWS * V)
    base = (3 * torch.randn(B, T, V, generator=g)).to(device, dtype)
    targets = torch.randint(0, V, (B, T), generator=g).to(device)
    lengths = torch.tensor([T, 1, T - 5, 0, 17], device=device)  # 2 ROWS + 27 real positions
    ours_in = base.clone().requires_grad_()
    loss, n = masked_cross_entropy(ours_in, targets, lengths, smoothing)
    loss.backward()
    theirs_in = base.clone().requires_grad_()
    valid = torch.arange(T, device=device)[None, :] < lengths[:, None]
    expected = F.cross_entropy(
        theirs_in.flatten(0, 1).float(),
        targets.masked_fill(~valid, -100).flatten(),
        label_smoothing=smoothing,
    )
    expected.backward()
    assert n == int(lengths.sum()) > 2 * ROWS
    torch.testing.assert_close(loss, expected, atol=1e-6, rtol=1e-6)
    tol = {"atol": 1e-8, "rtol": 1e-5} if dtype == torch.float32 else {"atol": 1e-8, "rtol": 1e-2}
    torch.testing.assert_close(ours_in.grad.float(), theirs_in.grad.float(), **tol)
    assert ours_in.grad.dtype == dtype and not ours_in.grad[~valid].any()
    with torch.no_grad():
        torch.testing.assert_close(masked_cross_entropy(base, targets, lengths, smoothing)[0], loss)


@pytest.mark.parametrize("device", DEVICES)
def test_fused_loss_scales_its_gradient_by_the_upstream_one(device):
    logits = torch.randn(2, 3, 5).to(device).requires_grad_()
    targets = torch.randint(0, 5, (2, 3)).to(device)
    lengths = torch.tensor([3, 2], device=device)
    (masked_cross_entropy(logits, targets, lengths)[0] * 0.25).backward()
    once = logits.grad.clone()
    logits.grad = None
    masked_cross_entropy(logits, targets, lengths)[0].backward()
    torch.testing.assert_close(once, 0.25 * logits.grad)
    loss = masked_cross_entropy(logits, targets, lengths)[0]
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="backward can run once per loss"):
        loss.backward()


@pytest.mark.parametrize("device", DEVICES)
def test_no_tokens_give_nan_and_a_bad_target_id_is_named(device):
    logits, targets = torch.randn(2, 3, 5).to(device), torch.randint(0, 5, (2, 3)).to(device)
    loss, n = masked_cross_entropy(logits, targets, torch.tensor([0, 0], device=device))
    assert n == 0 and torch.isnan(loss)  # as F.cross_entropy over no targets
    targets[1, 0] = 5  # past the vocabulary, inside the length
    with pytest.raises(IndexError, match=r"target ids must lie in \[0, 5\), got ids from"):
        masked_cross_entropy(logits, targets, torch.tensor([3, 1], device=device))
    targets[1, 0], targets[1, 2] = 0, 99  # past the length: ignored
    masked_cross_entropy(logits, targets, torch.tensor([3, 1], device=device))
