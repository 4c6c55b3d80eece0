"""Shared test data for the encoder–decoder tests."""

import torch

from seqlab.data.translation_batching import BOS, EOS, PAD, Batch


def random_translation_batch(src_vocab, tgt_vocab, b=4, s=7, t=6, seed=0):
    """Random padded batch: source ``x <eos>``, target ``<bos> y`` / ``y <eos>``."""
    g = torch.Generator().manual_seed(seed)
    src_len = torch.randint(2, s + 1, (b,), generator=g)
    src_len[0] = s
    tgt_len = torch.randint(2, t + 1, (b,), generator=g)
    tgt_len[-1] = t
    src = torch.randint(4, src_vocab, (b, s), generator=g)
    y = torch.randint(4, tgt_vocab, (b, t), generator=g)
    tgt_in = torch.cat([torch.full((b, 1), BOS), y[:, :-1]], dim=1)
    tgt_out = y.clone()
    for i in range(b):
        src[i, src_len[i] - 1], src[i, src_len[i] :] = EOS, PAD
        tgt_out[i, tgt_len[i] - 1], tgt_out[i, tgt_len[i] :] = EOS, PAD
        tgt_in[i, tgt_len[i] :] = PAD
    return Batch(src, src_len, tgt_in, tgt_out, tgt_len, torch.arange(b))


def check_loss_ignores_padding(model, batch, label_smoothing=None):
    """``model.loss`` counts the real target tokens, ignores whatever follows each target's end
    (decoder inputs and labels), and with ``label_smoothing`` ε equals
    (1 - ε) · cross-entropy + ε · mean over the vocabulary of -log p."""
    loss, num_tokens = model.loss(batch)
    assert num_tokens == int(batch.tgt_len.sum())
    pad = torch.arange(batch.tgt_in.shape[1])[None, :] >= batch.tgt_len[:, None]  # (B, T)
    assert pad.any()
    noisy = Batch(
        batch.src,
        batch.src_len,
        batch.tgt_in.masked_fill(pad, 7),  # decoder inputs after the end
        batch.tgt_out.masked_fill(pad, 5),  # labels after the end
        batch.tgt_len,
        batch.indices,
    )
    torch.testing.assert_close(model.loss(noisy)[0], loss)
    if label_smoothing is not None:
        logp = model(batch.src, batch.src_len, batch.tgt_in).log_softmax(-1)  # (B, T, V)
        uniform = -logp.mean(-1)[~pad].mean()
        eps = label_smoothing
        torch.testing.assert_close(model.loss(batch, eps)[0], (1 - eps) * loss + eps * uniform)
