"""nn.losses: the padding-aware cross-entropy every sequence model trains with."""

import torch
import torch.nn.functional as F

from seqlab.nn.losses import masked_cross_entropy


def test_masked_cross_entropy_ignores_logits_after_length():
    logits, targets = torch.randn(3, 5, 7), torch.randint(0, 7, (3, 5))
    lengths = torch.tensor([5, 2, 3])
    loss, n = masked_cross_entropy(logits, targets, lengths)
    changed, retargeted = logits.clone(), targets.clone()
    changed[1, 2:], changed[2, 3:] = 100.0, -100.0
    retargeted[1, 2:] = 6
    torch.testing.assert_close(masked_cross_entropy(changed, retargeted, lengths)[0], loss)
    rows = [(b, t) for b in range(3) for t in range(int(lengths[b]))]
    expected = torch.stack([F.cross_entropy(logits[b, t], targets[b, t]) for b, t in rows]).mean()
    torch.testing.assert_close(loss, expected)
    assert n == 10


def test_label_smoothing_mixes_in_the_uniform_distribution():
    logits, targets = torch.randn(2, 4, 9), torch.randint(0, 9, (2, 4))
    lengths = torch.tensor([4, 3])
    eps = 0.1
    smoothed, _ = masked_cross_entropy(logits, targets, lengths, eps)
    nll, _ = masked_cross_entropy(logits, targets, lengths)
    logp = logits.log_softmax(-1)
    valid = torch.arange(4)[None, :] < lengths[:, None]
    uniform = -logp.mean(-1)[valid].mean()  # cross-entropy against the uniform distribution
    torch.testing.assert_close(smoothed, (1 - eps) * nll + eps * uniform)
