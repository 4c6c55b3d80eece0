"""Every recurrent model takes ``model.cell`` from the cell records (seqlab.catalog.cells()).

gru/lstm build the same fused PyTorch layers as before (same state-dict keys, same numbers from
the same initial random state, same outputs), so existing checkpoints load unchanged; a cell
without a fused layer (peephole_lstm, gru_reset_before) builds seqlab's scratch layer.
"""

import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from conftest import random_translation_batch
from seqlab import catalog
from seqlab.catalog import Sizes
from seqlab.config import BahdanauConfig, config_from_dict
from seqlab.errors import ConfigError
from seqlab.models.forecasters import RNNForecaster, RNNForecasterConfig
from seqlab.models.rnn_classifier import RNNClassifier, RNNClassifierConfig
from seqlab.models.seq2seq import Seq2Seq, Seq2SeqConfig
from seqlab.nn.attention_scores import make_score
from seqlab.nn.pooling import masked_max
from seqlab.nn.rnn import RNN
from seqlab.tokens import PAD

FUSED = {"gru": nn.GRU, "lstm": nn.LSTM}
SCRATCH_CELLS = ["peephole_lstm", "gru_reset_before"]


def assert_same_state_dict(new: nn.Module, old: dict) -> None:
    assert list(new.state_dict()) == list(old)
    for key, value in new.state_dict().items():
        torch.testing.assert_close(value, old[key], rtol=0, atol=0)


# ------------------------------------------------------------------ the old layers, as they were
def old_seq2seq_state(cell, src_v, tgt_v, e, h, layers, dropout):
    rnn = FUSED[cell]
    between = dropout if layers > 1 else 0.0
    modules = nn.ModuleDict()
    modules["src_embed"] = nn.Embedding(src_v, e)
    modules["tgt_embed"] = nn.Embedding(tgt_v, e)
    modules["encoder"] = rnn(e, h, layers, batch_first=True, dropout=between)
    modules["decoder"] = rnn(e + h, h, layers, batch_first=True, dropout=between)
    modules["output"] = nn.Linear(h, tgt_v)
    return modules.state_dict()


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_seq2seq_gru_lstm_state_dict_unchanged(cell):
    cfg = Seq2SeqConfig(cell=cell, embed_dim=6, hidden_size=8, num_layers=2, dropout=0.1)
    torch.manual_seed(0)
    new = Seq2Seq(13, 11, cfg)
    torch.manual_seed(0)
    old = old_seq2seq_state(cell, 13, 11, 6, 8, 2, 0.1)
    assert_same_state_dict(new, old)
    assert isinstance(new.encoder, FUSED[cell])


@pytest.mark.parametrize("cell", ["gru", "lstm"])
@pytest.mark.parametrize("pooling", ["last", "max"])
def test_classifier_gru_lstm_state_dict_and_outputs_unchanged(cell, pooling):
    cfg = RNNClassifierConfig(
        cell=cell, embed_dim=6, hidden_size=5, num_layers=2, pooling=pooling, dropout=0.0
    )
    torch.manual_seed(0)
    new = RNNClassifier(17, 3, cfg).eval()
    torch.manual_seed(0)
    embed = nn.Embedding(17, 6, padding_idx=PAD)
    rnn = FUSED[cell](6, 5, 2, batch_first=True, bidirectional=True)
    head = nn.Linear(10, 3)
    old = {f"embed.{k}": v for k, v in embed.state_dict().items()}
    old |= {f"rnn.{k}": v for k, v in rnn.state_dict().items()}
    old |= {f"head.{k}": v for k, v in head.state_dict().items()}
    assert_same_state_dict(new, old)
    tokens = torch.randint(PAD + 1, 17, (4, 7))
    lengths = torch.tensor([7, 3, 5, 1])
    packed = pack_padded_sequence(embed(tokens), lengths, batch_first=True, enforce_sorted=False)
    out, state = rnn(packed)  # the old forward
    if pooling == "last":
        h = state[0] if isinstance(state, tuple) else state
        pooled = torch.cat(list(h[-2:]), dim=-1)
    else:
        pooled = masked_max(pad_packed_sequence(out, batch_first=True)[0], lengths)
    torch.testing.assert_close(new(tokens, lengths), head(pooled), rtol=0, atol=0)


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_forecaster_gru_lstm_state_dict_and_outputs_unchanged(cell):
    cfg = RNNForecasterConfig(cell=cell, hidden_size=6, num_layers=2, linear_skip=True)
    torch.manual_seed(0)
    new = RNNForecaster(5, cfg)
    torch.manual_seed(0)
    skip = nn.Linear(5, 1)
    rnn = FUSED[cell](1, 6, 2, batch_first=True)
    out = nn.Linear(6, 1)
    old = {f"skip.{k}": v for k, v in skip.state_dict().items()}
    old |= {f"rnn.{k}": v for k, v in rnn.state_dict().items()}
    old |= {f"out.{k}": v for k, v in out.state_dict().items()}
    assert_same_state_dict(new, old)
    x = torch.randn(3, 5)
    expected = out(rnn(x[..., None])[0][:, -1]).squeeze(-1) + skip(x).squeeze(-1)
    torch.testing.assert_close(new(x), expected, rtol=0, atol=0)


# -------------------------------------------------------------------- a cell with no fused layer
def one_training_step(model: nn.Module, loss_fn) -> None:
    before = {k: v.detach().clone() for k, v in model.state_dict().items()}
    loss = loss_fn()
    assert torch.isfinite(loss)
    loss.backward()
    torch.optim.SGD(model.parameters(), lr=0.5).step()
    rnn_keys = [k for k in before if ".cells." in k]
    assert rnn_keys, "the recurrent layer should be seqlab's scratch RNN"
    assert all(not torch.equal(before[k], model.state_dict()[k]) for k in rnn_keys)


@pytest.mark.parametrize("cell", SCRATCH_CELLS)
def test_seq2seq_with_a_scratch_cell_trains(cell):
    torch.manual_seed(0)
    model = Seq2Seq(13, 11, Seq2SeqConfig(cell=cell, embed_dim=6, hidden_size=8, num_layers=2))
    assert isinstance(model.encoder, RNN) and model.encoder.cell == cell
    batch = random_translation_batch(13, 11)
    logits = model(batch.src, batch.src_lengths, batch.tgt_in)
    assert logits.shape == (*batch.tgt_in.shape, 11)
    # padding after a sentence does not change what the encoder makes of it
    memory = model.eval().encode(batch.src, batch.src_lengths)
    n = int(batch.src_lengths[1])
    alone = model.encode(batch.src[1:2, :n], batch.src_lengths[1:2])
    torch.testing.assert_close(memory.context[1], alone.context[0], atol=1e-6, rtol=0)
    model.train()
    one_training_step(model, lambda: model.loss(batch)[0])


@pytest.mark.parametrize("cell", SCRATCH_CELLS)
@pytest.mark.parametrize("pooling", ["last", "mean"])
def test_bidirectional_classifier_with_a_scratch_cell_trains(cell, pooling):
    cfg = RNNClassifierConfig(cell=cell, embed_dim=6, hidden_size=5, num_layers=2, pooling=pooling)
    torch.manual_seed(0)
    model = RNNClassifier(17, 3, cfg)
    assert isinstance(model.rnn, RNN) and model.rnn.bidirectional
    tokens = torch.randint(PAD + 1, 17, (4, 7))
    lengths = torch.tensor([7, 3, 5, 1])
    model.eval()
    logits = model(tokens, lengths)
    assert logits.shape == (4, 3)
    padded = tokens.clone()
    padded[1, 3:] = 5  # other tokens after the end of row 1 change nothing
    torch.testing.assert_close(model(padded, lengths), logits, rtol=0, atol=0)
    model.train()
    labels = torch.tensor([0, 1, 2, 1])
    one_training_step(model, lambda: nn.functional.cross_entropy(model(tokens, lengths), labels))


@pytest.mark.parametrize("cell", SCRATCH_CELLS)
def test_forecaster_with_a_scratch_cell_trains(cell):
    torch.manual_seed(0)
    model = RNNForecaster(5, RNNForecasterConfig(cell=cell, hidden_size=6, num_layers=2))
    assert isinstance(model.rnn, RNN)
    x, y = torch.randn(3, 5), torch.randn(3)
    assert model(x).shape == (3,)
    one_training_step(model, lambda: nn.functional.mse_loss(model(x), y))


@pytest.mark.parametrize(
    ("arch", "dataset"),
    [("seq2seq", "fra-eng"), ("rnn_classifier", "sst2"), ("rnn_forecaster", "sine")],
)
def test_unknown_cell_lists_the_registered_cells(arch, dataset):
    with pytest.raises(ConfigError) as exc:
        config_from_dict({"model": {"arch": arch, "cell": "lstn"}, "data": {"dataset": dataset}})
    msg = str(exc.value)
    assert "model.cell" in msg and "'lstn'" in msg
    assert "'peephole_lstm'" in msg and "'gru_reset_before'" in msg


# ------------------------------------------------------------------------------------- Bahdanau
def build_bahdanau(cfg, sizes):
    return catalog.models()["bahdanau"].build(cfg, sizes)


def old_bahdanau_state(decoder, src_v, tgt_v, e, h, layers):
    """The layers of the GRU-only Bahdanau models, built in their order."""
    m = nn.Module()
    m.src_embed, m.tgt_embed = nn.Embedding(src_v, e), nn.Embedding(tgt_v, e)
    if decoder == "maxout":
        m.encoder = nn.GRU(e, h, layers, batch_first=True, bidirectional=True)
        m.init_proj = nn.ModuleList(nn.Linear(h, h) for _ in range(layers))
        m.attention = make_score("additive", h, 2 * h, h, 256)
        m.gru_y, m.gru_c, m.gru_s = (
            nn.Linear(e, 3 * h),
            nn.Linear(2 * h, 3 * h, False),
            nn.Linear(h, 3 * h),
        )
        if layers > 1:
            m.upper = nn.GRU(3 * h, h, layers - 1, batch_first=True)
        m.maxout = nn.Linear(h + 2 * h + e, 2 * e)
    else:
        m.encoder = nn.GRU(e, h, layers, batch_first=True)
        m.attention = make_score("additive", h, h, h, 256)
        m.decoder = nn.GRU(e + h, h, layers, batch_first=True)
    m.output = nn.Linear(e if decoder == "maxout" else h, tgt_v)
    return m.state_dict()


@pytest.mark.parametrize("decoder", ["maxout", "linear"])
@pytest.mark.parametrize("layers", [1, 2])
def test_bahdanau_gru_state_dict_unchanged(decoder, layers):
    cfg = BahdanauConfig(embed_dim=6, hidden_size=8, num_layers=layers, decoder=decoder)
    torch.manual_seed(0)
    new = build_bahdanau(cfg, Sizes("bahdanau", src_vocab_size=13, tgt_vocab_size=11))
    torch.manual_seed(0)
    assert_same_state_dict(new, old_bahdanau_state(decoder, 13, 11, 6, 8, layers))


@pytest.mark.parametrize("cell", ["lstm", *SCRATCH_CELLS])
@pytest.mark.parametrize("decoder", ["maxout", "linear"])
def test_bahdanau_with_another_cell_aligns_decodes_step_by_step_and_trains(cell, decoder):
    cfg = BahdanauConfig(cell=cell, embed_dim=6, hidden_size=8, num_layers=2, decoder=decoder)
    torch.manual_seed(0)
    model = build_bahdanau(cfg, Sizes("bahdanau", src_vocab_size=13, tgt_vocab_size=11)).eval()
    batch = random_translation_batch(13, 11)
    memory = model.encode(batch.src, batch.src_lengths)
    logits, weights = model.decode(memory, batch.tgt_in, need_weights=True)
    b, t = batch.tgt_in.shape
    assert logits.shape == (b, t, 11) and weights.shape == (b, t, batch.src.shape[1])
    torch.testing.assert_close(weights.sum(-1), torch.ones(b, t))
    assert (weights[1, :, int(batch.src_lengths[1]) :] == 0).all()  # no weight on padding
    # one token at a time, with the rows reversed in between, gives the teacher-forced logits
    order = torch.arange(b).flip(0)
    memory_r = model.reorder_memory(memory, order)
    state = model.reorder_state(model.init_state(memory), order)
    for i in range(t):
        step, state, _ = model.decode_step(memory_r, state, batch.tgt_in[order, i])
        torch.testing.assert_close(step, logits[order, i], atol=1e-5, rtol=0)
    model.train()
    before = {k: v.detach().clone() for k, v in model.state_dict().items()}
    model.loss(batch)[0].backward()
    torch.optim.SGD(model.parameters(), lr=0.5).step()
    changed = {k for k, v in model.state_dict().items() if not torch.equal(v, before[k])}
    assert {
        k for k in before if k.startswith(("encoder.", "upper.", "decoder.", "cell."))
    } <= changed
