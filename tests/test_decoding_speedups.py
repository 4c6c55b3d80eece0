"""The decoding speed-ups change no output: the preallocated key/value cache, the K beams of a
sentence sharing its projected source, the explicit few-query attention, the search's own
log-normaliser, and seqlab's engine decoding several batches at once (``--workers``).

Each compares the fast path with the plain one it replaced, in fp32 and with bf16 forced.
"""

import math

import pytest
import torch

from devices import DEVICES
from precision_helpers import PRECISIONS, computing_in
from seqlab.config.models import TransformerConfig
from seqlab.models.search import beam_search
from seqlab.models.transformer_seq2seq import TransformerSeq2Seq
from seqlab.models.vocab_select import log_normaliser
from seqlab.nn.attention import MultiHeadAttention, scaled_dot_product_attention
from seqlab.nn.kv_cache import ROOM, KVCache
from seqlab.tokens import EOS

B, H, D = 3, 2, 8


def _plain(cache: KVCache) -> KVCache:
    """The same keys and values without preallocated room (appending concatenates)."""
    return KVCache(cache.key.clone(), cache.value.clone())


def test_kv_cache_writes_in_place_and_never_changes_an_older_cache():
    empty = torch.zeros(B, H, 0, D // H)
    cache = KVCache(empty, empty)
    steps = [torch.randn(B, H, 1, D // H) for _ in range(ROOM + 3)]
    caches = []
    for k in steps:  # grows past one allotment of ROOM positions
        cache = cache.append(k, -k)
        caches.append(cache)
    torch.testing.assert_close(cache.key, torch.cat(steps, 2), rtol=0, atol=0)
    torch.testing.assert_close(cache.value, -torch.cat(steps, 2), rtol=0, atol=0)
    first_room = caches[0].room
    assert first_room is caches[ROOM - 1].room  # written in place until full
    assert caches[ROOM].room is not first_room  # then a larger storage
    # two continuations of one prefix: the older cache is copied, never overwritten
    old = caches[4]
    a, b = torch.randn(B, H, 1, D // H), torch.randn(B, H, 1, D // H)
    left, right = old.append(a, a), old.append(b, b)
    torch.testing.assert_close(left.key[:, :, -1:], a, rtol=0, atol=0)
    torch.testing.assert_close(right.key[:, :, -1:], b, rtol=0, atol=0)
    torch.testing.assert_close(old.key, torch.cat(steps[:5], 2), rtol=0, atol=0)


@pytest.mark.parametrize("device", DEVICES)
def test_kv_cache_reorder_selects_rows_and_keeps_room(device):
    empty = torch.zeros(B, H, 0, D // H, device=device)
    cache = KVCache(empty, empty)
    for _ in range(5):
        k = torch.randn(B, H, 1, D // H).to(device)
        cache = cache.append(k, 2 * k)
    rows = torch.tensor([2, 2, 0, 1], device=device)  # select, repeat, permute
    picked = cache.index_select(rows)
    plain = _plain(cache).index_select(rows)
    torch.testing.assert_close(picked.key, plain.key, rtol=0, atol=0)
    torch.testing.assert_close(picked.value, plain.value, rtol=0, atol=0)
    new = torch.randn(4, H, 1, D // H).to(device)
    torch.testing.assert_close(
        picked.append(new, new).key, plain.append(new, new).key, rtol=0, atol=0
    )
    assert picked.room is not None and picked.room.key.shape[1] == 4  # (C, B, h, d_k)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("need_weights", [False, True])
def test_beams_sharing_one_source_equal_one_copy_per_beam(precision, need_weights, device):
    """attend() with B rows of keys for B·K queries equals the keys repeated K times."""
    torch.manual_seed(0)
    att = MultiHeadAttention(D, H).eval().to(device)
    k, t, s = 4, 2, 5
    memory = torch.randn(B, s, D).to(device)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1] * 5, [1, 0, 0, 0, 0]], dtype=torch.bool)[:, None]
    mask = mask.to(device)
    query = torch.randn(B * k, t, D).to(device)
    with computing_in(precision, device):
        kv = att.project_kv(memory, memory)  # (B, h, S, d_k)
        shared, w_shared = att.attend(query, kv, mask, need_weights=need_weights)
        rows = torch.arange(B, device=device).repeat_interleave(k)
        copied, w_copied = att.attend(
            query, kv.index_select(rows), mask[rows], need_weights=need_weights
        )
    tol = 1e-6 if precision == "fp32" else 2e-2
    torch.testing.assert_close(shared.float(), copied.float(), rtol=0, atol=tol)
    if need_weights:
        torch.testing.assert_close(w_shared.float(), w_copied.float(), rtol=0, atol=tol)


def test_rows_that_cannot_share_the_keys_are_refused():
    att = MultiHeadAttention(D, H).eval()
    kv = att.project_kv(torch.randn(B, 5, D), torch.randn(B, 5, D))
    with pytest.raises(ValueError, match="7 query rows cannot share the keys of 3 rows"):
        att.attend(torch.randn(7, 1, D), kv)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("tq", [2, 5, 7])
def test_few_queries_without_gradients_match_the_fused_kernel(tq, device):
    q, k, v = torch.randn(B, H, tq, D), torch.randn(B, H, 7, D), torch.randn(B, H, 7, 3)
    q, k, v = q.to(device), k.to(device), v.to(device)
    mask = (torch.arange(7) < torch.tensor([7, 4, 1])[:, None])[:, None, None]  # (B, 1, 1, 7)
    mask = mask.to(device)
    with torch.no_grad():
        out, _ = scaled_dot_product_attention(q, k, v, mask)
        causal, _ = scaled_dot_product_attention(q, k, v, is_causal=True)
    fused = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(out, fused, rtol=0, atol=1e-5)
    bottom_right = torch.ones(tq, 7, dtype=torch.bool, device=device).tril(7 - tq)
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bottom_right)
    torch.testing.assert_close(causal, ref, rtol=0, atol=1e-5)


@pytest.mark.parametrize("scale", [10.0, 1e3])  # unshifted, and shifted where exp overflows
def test_log_normaliser_equals_logsumexp_with_removed_tokens(scale):
    logits = torch.randn(6, 50) * scale
    logits[:, :2] = -math.inf  # the tokens no hypothesis may hold
    top = logits.amax(-1, keepdim=True)
    torch.testing.assert_close(
        log_normaliser(logits.clone(), top),
        logits.logsumexp(-1, keepdim=True),
        rtol=1e-6,
        atol=1e-5,
    )


def _transformer() -> TransformerSeq2Seq:
    cfg = TransformerConfig(
        d_model=16, num_heads=2, encoder_layers=1, decoder_layers=2, d_ff=32, dropout=0.0
    )
    return TransformerSeq2Seq(12, 12, cfg).eval()


@pytest.mark.parametrize("device", DEVICES)
def test_transformer_memory_is_shared_by_beams_and_selected_by_sentence(device):
    torch.manual_seed(1)
    model = _transformer().to(device)
    src = torch.tensor([[5, 6, 7, EOS], [8, EOS, 0, 0], [9, 9, EOS, 0]], device=device)
    lengths = torch.tensor([4, 2, 3], device=device)
    with torch.no_grad():
        memory = model.encode(src, lengths)
        shared = model.expand_memory(memory, 3, 4)
        assert shared.beams == 4 and shared.cross_kv[0].key.shape[0] == 3  # not copied
        copied = model.reorder_memory(memory, torch.arange(3, device=device).repeat_interleave(4))
        tokens = torch.randint(4, 12, (12,)).to(device)
        a, _, wa = model.decode_step(shared, model.init_state(shared), tokens, need_weights=True)
        b, _, wb = model.decode_step(copied, model.init_state(copied), tokens, need_weights=True)
        torch.testing.assert_close(a, b, rtol=0, atol=1e-5)
        torch.testing.assert_close(wa, wb, rtol=0, atol=1e-6)
        blocks = torch.tensor([8, 9, 10, 11, 0, 1, 2, 3], device=device)  # sentences 2 and 0
        kept = model.reorder_memory(shared, blocks)
        assert kept.beams == 4 and kept.mask.shape[0] == 2
        rows = torch.tensor([5, 0, 11], device=device)  # single rows: one copy each
        single = model.reorder_memory(shared, rows)
        assert single.beams == 1
        for picked, ref in ((kept, blocks), (single, rows)):
            x, _, _ = model.decode_step(picked, model.init_state(picked), tokens[ref])
            y, _, _ = model.decode_step(
                model.reorder_memory(copied, ref), model.init_state(picked), tokens[ref]
            )
            torch.testing.assert_close(x, y, rtol=0, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("precision", PRECISIONS)
def test_beam_search_with_shared_memory_equals_copied_memory(precision, device):
    """The whole search, shared source against one copy per beam (the default of the base
    class), gives the same hypotheses and scores."""
    torch.manual_seed(2)
    model = _transformer()
    src = torch.randint(4, 12, (5, 6))
    src[:, -1] = EOS
    src, lengths = src.to(device), torch.full((5,), 6, device=device)

    class Copying(TransformerSeq2Seq):
        expand_memory = TransformerSeq2Seq.__mro__[1].expand_memory  # the base class's

    copying = Copying(12, 12, model.cfg).eval()
    copying.load_state_dict(model.state_dict())
    model, copying = model.to(device), copying.to(device)
    with computing_in(precision, device):
        fast = beam_search(model, src, lengths, beam_size=3, nbest=3, max_len_b=8)
        slow = beam_search(copying, src, lengths, beam_size=3, nbest=3, max_len_b=8)
    same = 0
    for f, s in zip(fast, slow, strict=True):
        if precision == "fp32":  # bf16 rounds other shapes otherwise: near-ties may swap
            assert [h.tokens for h in f] == [h.tokens for h in s]
        if [h.tokens for h in f] == [h.tokens for h in s]:
            tol = 1e-4 if precision == "fp32" else 0.1
            assert [h.score for h in f] == pytest.approx([h.score for h in s], abs=tol)
            same += 1
    assert same >= 4
