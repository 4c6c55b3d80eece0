"""Greedy and beam search over the three encoder–decoder models.

Most tests use tiny models trained for a few seconds to reverse short sequences (confident
models, varied output lengths); the exhaustive-search and length tests use untrained ones.
"""

import copy
import itertools
import math

import pytest
import torch
from torch import nn

from devices import DEVICES
from precision_helpers import PRECISIONS, SCORE_TOL, assert_same_outputs, computing_in
from seqlab.config import BahdanauConfig, Seq2SeqConfig, TransformerConfig
from seqlab.data.translation_batching import BOS, EOS, PAD, Batch, pad_sequences
from seqlab.models.bahdanau import Bahdanau
from seqlab.models.encoder_decoder import EncoderDecoder
from seqlab.models.search import beam_search, greedy_search, max_output_lengths, token_log_probs
from seqlab.models.seq2seq import Seq2Seq
from seqlab.models.transformer_seq2seq import TransformerSeq2Seq

ARCHS = ["seq2seq", "bahdanau", "transformer"]
V = 10  # 4 reserved ids + 6 symbols
# (steps, learning rate) that make each model reverse sequences of 1-4 symbols
TRAINING = {"seq2seq": (150, 1e-2), "bahdanau": (150, 1e-2), "transformer": (150, 1e-2)}


def build(arch, vocab=V):
    if arch == "seq2seq":
        return Seq2Seq(vocab, vocab, Seq2SeqConfig(embed_dim=32, hidden_size=64, dropout=0.0))
    if arch == "bahdanau":
        return Bahdanau(vocab, vocab, BahdanauConfig(embed_dim=32, hidden_size=32, dropout=0.0))
    cfg = TransformerConfig(
        d_model=32,
        num_heads=2,
        encoder_layers=1,
        decoder_layers=1,
        d_ff=64,
        dropout=0.0,
        max_len=32,
    )
    return TransformerSeq2Seq(vocab, vocab, cfg)


def reverse_task(g, n, max_symbols=4):
    """n random sequences of 1..max_symbols symbols; the target is the source reversed."""
    xs = [
        torch.randint(4, V, (int(k),), generator=g).tolist()
        for k in torch.randint(1, max_symbols + 1, (n,), generator=g)
    ]
    ys = [x[::-1] for x in xs]
    src, src_lengths = pad_sequences([x + [EOS] for x in xs])
    tgt_in, tgt_lengths = pad_sequences([[BOS] + y for y in ys])
    tgt_out, _ = pad_sequences([y + [EOS] for y in ys])
    return Batch(src, src_lengths, tgt_in, tgt_out, tgt_lengths, torch.arange(n)), ys


@pytest.fixture(scope="module", params=ARCHS)
def trained(request):
    torch.manual_seed(0)
    model = build(request.param)
    steps, lr = TRAINING[request.param]
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    g = torch.Generator().manual_seed(0)
    for _ in range(steps):
        loss, _ = model.loss(reverse_task(g, 64)[0])
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    return model.eval()


@pytest.fixture
def test_set():
    return reverse_task(torch.Generator().manual_seed(1), 64)


def on(device, model, batch):
    """The trained model and the batch on ``device`` (elsewhere than the CPU a copy of the model:
    the fixture is shared, and ``Module.to`` moves it in place)."""
    if torch.device(device).type == "cpu":
        return model, batch
    return copy.deepcopy(model).to(device), batch.to(device)


# ------------------------------------------------------------------------------- trained models
def test_trained_model_reverses_with_greedy_and_beam(trained, test_set):
    batch, expected = test_set
    greedy = greedy_search(trained, batch.src, batch.src_lengths)
    beam = beam_search(trained, batch.src, batch.src_lengths, beam_size=3)
    assert sum(h.tokens == y for h, y in zip(greedy, expected, strict=True)) >= 0.9 * len(expected)
    assert sum(h[0].tokens == y for h, y in zip(beam, expected, strict=True)) >= 0.9 * len(expected)


def sources_of(batch):
    return [batch.src[i, : int(n)].tolist() for i, n in enumerate(batch.src_lengths)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("precision", PRECISIONS)
def test_beam_size_one_is_greedy(trained, test_set, precision, device):
    """Same batch, same shapes: beam 1 is greedy exactly, in bf16 as well."""
    trained, batch = on(device, trained, test_set[0])
    with computing_in(precision, device):
        greedy = greedy_search(trained, batch.src, batch.src_lengths)
        beam = beam_search(trained, batch.src, batch.src_lengths, beam_size=1, length_penalty=0.0)
    for g, (b,) in zip(greedy, beam, strict=True):
        assert g.tokens == b.tokens
        assert g.log_prob == pytest.approx(b.log_prob, abs=1e-5)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_a_sentence_decodes_the_same_alone_in_a_batch_and_with_padding(
    trained, test_set, search, precision, device
):
    trained, batch = on(device, trained, test_set[0])
    alpha = None if search == "greedy" else 1.0

    def run(src, src_lengths):
        with computing_in(precision, device):
            if search == "greedy":
                return [[h] for h in greedy_search(trained, src, src_lengths)]
            return beam_search(trained, src, src_lengths, beam_size=3, nbest=3)

    def same(a, b, src_ids):
        if precision == "fp32":
            assert [h.tokens for h in a] == [h.tokens for h in b]
        else:  # the best output, up to ties; the rest of an n-best list may reorder near-ties
            assert_same_outputs(
                trained, [src_ids], [a[0].tokens], [b[0].tokens], precision, alpha, device
            )
        if [h.tokens for h in a] == [h.tokens for h in b]:
            tol = SCORE_TOL[precision]
            assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=tol)

    together = run(batch.src, batch.src_lengths)  # 64 sentences of different lengths
    pads = torch.full((64, 5), PAD, device=batch.src.device)
    padded = run(torch.cat([batch.src, pads], dim=1), batch.src_lengths)
    for i in (0, 17, 63):
        n = int(batch.src_lengths[i])
        (alone,) = run(batch.src[i : i + 1, :n], batch.src_lengths[i : i + 1])
        same(alone, together[i], batch.src[i, :n].tolist())
        same(alone, padded[i], batch.src[i, :n].tolist())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("precision", PRECISIONS)
def test_cached_search_equals_recomputing_the_prefix(trained, test_set, precision, device):
    trained, batch = on(device, trained, test_set[0])
    src, src_lengths = batch.src[:16], batch.src_lengths[:16]
    attention = not isinstance(trained, Seq2Seq)
    tol = SCORE_TOL[precision]
    for search, kwargs in [(greedy_search, {}), (beam_search, {"beam_size": 4, "nbest": 4})]:
        with computing_in(precision, device):
            cached = search(trained, src, src_lengths, need_weights=attention, **kwargs)
            recomputed = search(
                trained, src, src_lengths, need_weights=attention, use_cache=False, **kwargs
            )
        alpha = 1.0 if kwargs else None
        best = [(a[0] if isinstance(a, list) else a).tokens for a in cached]
        best_r = [(b[0] if isinstance(b, list) else b).tokens for b in recomputed]
        assert_same_outputs(trained, sources_of(batch)[:16], best, best_r, precision, alpha, device)
        for a, b in zip(cached, recomputed, strict=True):
            a, b = (a, b) if isinstance(a, list) else ([a], [b])
            if precision == "fp32":
                assert [h.tokens for h in a] == [h.tokens for h in b]
            for ha, hb in zip(a, b, strict=True):
                if ha.tokens != hb.tokens:
                    continue
                assert ha.score == pytest.approx(hb.score, abs=tol)
                if attention:
                    torch.testing.assert_close(ha.attention, hb.attention, atol=tol, rtol=0)


def test_nbest_lists_are_sorted_unique_and_length_normalised(trained, test_set):
    batch, _ = test_set
    for alpha in (0.0, 0.6, 1.0):
        results = beam_search(
            trained,
            batch.src[:16],
            batch.src_lengths[:16],
            beam_size=5,
            nbest=5,
            length_penalty=alpha,
        )
        for hyps in results:
            assert len(hyps) == 5
            scores = [h.score for h in hyps]
            assert scores == sorted(scores, reverse=True)
            assert len({tuple(h.tokens) for h in hyps}) == 5
            for h in hyps:
                assert h.score == pytest.approx(h.log_prob / (len(h.tokens) + 1) ** alpha)
                assert not {PAD, BOS, EOS} & set(h.tokens)


def test_attention_of_a_hypothesis(trained, test_set):
    batch, _ = test_set
    (hyp,) = greedy_search(trained, batch.src[:1], batch.src_lengths[:1], need_weights=True)
    if isinstance(trained, Seq2Seq):
        assert hyp.attention is None
        return
    assert hyp.attention.shape == (len(hyp.tokens) + 1, int(batch.src_lengths[0]))
    torch.testing.assert_close(hyp.attention.sum(-1), torch.ones(len(hyp.tokens) + 1))
    best = beam_search(
        trained, batch.src[:1], batch.src_lengths[:1], beam_size=3, need_weights=True
    )
    assert best[0][0].attention.shape == (len(best[0][0].tokens) + 1, int(batch.src_lengths[0]))


@torch.no_grad()
def test_token_log_probs_add_up_to_the_searchs_log_prob(trained, test_set):
    """Reading a hypothesis back by teacher forcing gives each token's share of its log_prob."""
    batch, _ = test_set
    src, lengths = batch.src[:6], batch.src_lengths[:6]
    for hyps in (
        [[h] for h in greedy_search(trained, src, lengths)],
        beam_search(trained, src, lengths, beam_size=3, nbest=3),
    ):
        for i, nbest in enumerate(hyps):
            memory = trained.encode(src[i : i + 1, : int(lengths[i])], lengths[i : i + 1])
            for h in nbest:
                logits, _ = trained.decode(memory, torch.tensor([[BOS, *h.tokens]]))
                found = token_log_probs(logits[0], torch.tensor([*h.tokens, EOS]))  # (T,)
                assert found.shape == (len(h.tokens) + 1,) and (found <= 0).all()
                assert float(found.sum()) == pytest.approx(h.log_prob, abs=1e-4)


# ----------------------------------------------------------------------------- untrained models
@pytest.mark.parametrize("arch", ARCHS)
def test_exhaustive_beam_equals_brute_force(arch):
    """A beam wide enough to keep every prefix finds every output, with its exact score."""
    vocab, max_tokens = 7, 3
    model = build(arch, vocab).eval()
    src, src_lengths = torch.tensor([[4, 5, 4, EOS]]), torch.tensor([4])
    symbols = [t for t in range(vocab) if t not in (PAD, BOS, EOS)]  # search never outputs those
    outputs = [list(y) for n in range(max_tokens + 1) for y in itertools.product(symbols, repeat=n)]
    k = len(outputs)  # 1 + 4 + 16 + 64
    (hyps,) = beam_search(
        model, src, src_lengths, beam_size=k, nbest=k, length_penalty=0.0, max_len_a=0, max_len_b=3
    )
    with torch.no_grad():
        memory = model.reorder_memory(
            model.encode(src, src_lengths), torch.zeros(k, dtype=torch.long)
        )
        tgt_in, _ = pad_sequences([[BOS] + y for y in outputs])
        tgt_out, _ = pad_sequences([y + [EOS] for y in outputs])
        logits = model.decode(memory, tgt_in)[0]
        logits[..., [PAD, BOS]] = -math.inf  # never output: renormalised without them
        logp = logits.log_softmax(-1)
        token_logp = logp.gather(-1, tgt_out[..., None]).squeeze(-1)
        valid = (
            torch.arange(tgt_out.shape[1])[None, :]
            <= torch.tensor([len(y) for y in outputs])[:, None]
        )
        brute = token_logp.masked_fill(~valid, 0.0).sum(-1)
    expected = sorted(zip(brute.tolist(), map(tuple, outputs), strict=True), reverse=True)
    assert [tuple(h.tokens) for h in hyps] == [y for _, y in expected]
    assert [h.score for h in hyps] == pytest.approx([s for s, _ in expected], abs=1e-4)


class NeverEnds(nn.Module):
    """A model whose ``<eos>`` is almost impossible: outputs run to the length limit."""

    def __init__(self, model):
        super().__init__()
        self.model, self.max_decode_len = model, model.max_decode_len

    def _no_eos(self, logits):
        return logits.index_fill(-1, torch.tensor([EOS]), -1e4)

    def encode(self, src, src_lengths):
        return self.model.encode(src, src_lengths)

    def init_state(self, memory):
        return self.model.init_state(memory)

    def decode(self, memory, tgt_in, *, need_weights=False):
        logits, weights = self.model.decode(memory, tgt_in, need_weights=need_weights)
        return self._no_eos(logits), weights

    def decode_step(self, memory, state, tokens, *, need_weights=False):
        logits, state, weights = self.model.decode_step(
            memory, state, tokens, need_weights=need_weights
        )
        return self._no_eos(logits), state, weights

    def expand_memory(self, memory, sentences, beams):
        return self.model.expand_memory(memory, sentences, beams)

    def reorder_memory(self, memory, indices):
        return self.model.reorder_memory(memory, indices)

    def reorder_state(self, state, indices):
        return self.model.reorder_state(state, indices)


@pytest.mark.parametrize("arch", ARCHS)
def test_max_length_is_a_times_source_length_plus_b(arch):
    model = NeverEnds(build(arch))
    batch, _ = reverse_task(torch.Generator().manual_seed(2), 8)
    for a, b, cap in [(1.5, 2, None), (0.0, 3, None), (2.0, 100, 7)]:
        limits = [min(math.floor(a * n + b), cap or 10**9) for n in batch.src_lengths.tolist()]
        if arch == "transformer":
            limits = [min(n, 31) for n in limits]  # 32 positions: <bos> + 31 tokens
        greedy = greedy_search(
            model, batch.src, batch.src_lengths, max_len_a=a, max_len_b=b, max_len=cap
        )
        assert [len(h.tokens) for h in greedy] == limits
        beams = beam_search(
            model, batch.src, batch.src_lengths, beam_size=2, max_len_a=a, max_len_b=b, max_len=cap
        )
        assert [len(h[0].tokens) for h in beams] == limits
    assert max_output_lengths(model, torch.tensor([4]), 1.5, 10).tolist() == [16]


def test_nbest_must_fit_in_the_beam():
    model = build("bahdanau").eval()
    with pytest.raises(ValueError, match="nbest"):
        beam_search(model, torch.tensor([[4, EOS]]), torch.tensor([2]), beam_size=2, nbest=3)


def test_search_restores_training_mode():
    model = build("transformer").train()
    greedy_search(model, torch.tensor([[4, EOS]]), torch.tensor([2]), max_len_b=2)
    assert model.training


class D2LTable(EncoderDecoder):
    """d2l.ai §10.8's example as a model: next-token probabilities looked up by prefix (A, B, C
    are ids 4, 5, 6); the state is the prefix read so far (the page 10b worked example)."""

    TABLE = {
        (): {4: 0.5, 5: 0.2, 6: 0.3},
        (4,): {4: 0.2, 5: 0.4, 6: 0.3, EOS: 0.1},
        (4, 5): {4: 0.2, 5: 0.2, 6: 0.4, EOS: 0.2},
        (4, 6): {4: 0.1, 5: 0.6, 6: 0.1, EOS: 0.2},
        (4, 5, 6): {4: 0.1, 5: 0.2, 6: 0.1, EOS: 0.6},
        (4, 6, 5): {4: 0.1, 5: 0.1, 6: 0.2, EOS: 0.6},
    }
    UNIFORM = {4: 0.3, 5: 0.3, 6: 0.3, EOS: 0.1}  # every other prefix

    def probability(self, tokens):
        p = 1.0
        for t, token in enumerate([*tokens, EOS]):
            p *= self.TABLE.get(tuple(tokens[:t]), self.UNIFORM).get(token, 0.0)
        return p

    def encode(self, src, src_lengths):
        return src

    def init_state(self, memory):
        return memory.new_zeros(memory.size(0), 0)

    def run_decoder(self, memory, tokens, state, need_weights):
        steps = []
        for t in range(tokens.size(1)):
            state = torch.cat([state, tokens[:, t : t + 1]], dim=1)  # (R, t + 1), <bos> first
            rows = torch.full((state.size(0), 7), -math.inf)  # (R, V)
            for r, prefix in enumerate(state[:, 1:].tolist()):
                for token, p in self.TABLE.get(tuple(prefix), self.UNIFORM).items():
                    rows[r, token] = math.log(p)
            steps.append(rows)
        return torch.stack(steps, dim=1), state, None  # (R, T, V)

    def reorder_memory(self, memory, indices):
        return memory[indices]

    def reorder_state(self, state, indices):
        return state[indices]

    def expand_memory(self, memory, sentences, beams):
        return memory.repeat_interleave(beams, dim=0)  # no parameters to find a device on


def test_a_beam_of_two_finds_what_greedy_misses_on_d2ls_table():
    table = D2LTable()
    src, src_lengths = torch.zeros(1, 1, dtype=torch.long), torch.tensor([1])
    limit = {"max_len_a": 0.0, "max_len_b": 3}
    everything = [list(y) for n in range(4) for y in itertools.product((4, 5, 6), repeat=n)]
    best = max(everything, key=table.probability)
    assert best == [4, 6, 5] and table.probability(best) == pytest.approx(0.054)
    greedy = greedy_search(table, src, src_lengths, **limit)[0]
    assert greedy.tokens == [4, 5, 6] and math.exp(greedy.log_prob) == pytest.approx(0.048)
    (one,) = beam_search(table, src, src_lengths, beam_size=1, length_penalty=0.0, **limit)
    assert one[0].tokens == greedy.tokens
    (two,) = beam_search(table, src, src_lengths, beam_size=2, nbest=2, length_penalty=0.0, **limit)
    assert [h.tokens for h in two] == [[4, 6, 5], [4, 5, 6]]
    assert [math.exp(h.log_prob) for h in two] == pytest.approx([0.054, 0.048])
