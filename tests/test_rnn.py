"""Recurrent layers: scratch == PyTorch's fused modules (outputs, states, gradients), lengths."""

import pytest
import torch
from torch import nn

from seqlab.rnn import CELL_NAMES, RNN, fused_to_scratch_state_dict, scratch_to_fused_state_dict

TORCH = {"rnn": nn.RNN, "rnn_relu": nn.RNN, "gru": nn.GRU, "lstm": nn.LSTM}
B, T, I, H = 3, 6, 5, 7


def torch_module(cell, num_layers, bidirectional):
    kwargs = {"nonlinearity": "relu"} if cell == "rnn_relu" else {}
    return TORCH[cell](I, H, num_layers, batch_first=True, bidirectional=bidirectional, **kwargs)


def as_tuple(state):
    return state if isinstance(state, tuple) else (state,)


@pytest.mark.parametrize("cell", ["rnn", "rnn_relu", "gru", "lstm"])
@pytest.mark.parametrize("num_layers", [1, 2, 3])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_scratch_equals_torch_with_copied_weights(cell, num_layers, bidirectional):
    ref = torch_module(cell, num_layers, bidirectional)
    ours = RNN(cell, I, H, num_layers, bidirectional=bidirectional, backend="scratch")
    ours.load_state_dict(
        fused_to_scratch_state_dict(
            {f"fused.{k}": v for k, v in ref.state_dict().items()}, num_layers, bidirectional
        )
    )
    x = torch.randn(B, T, I)
    d = 2 if bidirectional else 1
    h0 = tuple(torch.randn(num_layers * d, B, H) for _ in range(2 if cell == "lstm" else 1))
    state = h0 if cell == "lstm" else h0[0]
    out_ref, st_ref = ref(x, state)
    out, st = ours(x, state)
    torch.testing.assert_close(out, out_ref, atol=1e-5, rtol=1e-5)
    for a, b in zip(as_tuple(st), as_tuple(st_ref), strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    # the same scalar loss gives the same parameter gradients
    w = torch.randn_like(out)
    ((out_ref * w).sum() + sum(s.sum() for s in as_tuple(st_ref))).backward()
    ((out * w).sum() + sum(s.sum() for s in as_tuple(st))).backward()
    ref_grads = fused_to_scratch_state_dict(
        {f"fused.{k}": p.grad for k, p in ref.named_parameters()}, num_layers, bidirectional
    )
    for name, p in ours.named_parameters():
        torch.testing.assert_close(p.grad, ref_grads[name], atol=1e-5, rtol=1e-4, msg=name)


@pytest.mark.parametrize("cell", ["rnn", "gru", "lstm"])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_backend_conversion_round_trips_exactly(cell, bidirectional):
    scratch = RNN(cell, I, H, 2, bidirectional=bidirectional, backend="scratch")
    fused = scratch.to_backend("fused")
    back = fused.to_backend("scratch")
    for k, v in scratch.state_dict().items():
        assert torch.equal(v, back.state_dict()[k])
    x = torch.randn(B, T, I)
    torch.testing.assert_close(scratch(x)[0], fused(x)[0], atol=1e-5, rtol=1e-5)
    sd = scratch_to_fused_state_dict(scratch.state_dict(), 2, bidirectional)
    assert set(sd) == set(fused.state_dict())


@pytest.mark.parametrize("backend", ["scratch", "fused"])
@pytest.mark.parametrize("cell", ["rnn", "gru", "lstm"])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_variable_lengths_equal_running_each_sequence_alone(backend, cell, bidirectional):
    layer = RNN(cell, I, H, 2, bidirectional=bidirectional, backend=backend).eval()
    lengths = torch.tensor([6, 2, 4])
    x = torch.randn(B, T, I)
    x_padded = x.clone()
    for b, n in enumerate(lengths):
        x_padded[b, n:] = 99.0  # garbage in padding must not leak
    out, state = layer(x_padded, lengths=lengths)
    for b, n in enumerate(lengths.tolist()):
        alone, alone_state = layer(x[b : b + 1, :n])
        torch.testing.assert_close(out[b, :n], alone[0], atol=1e-5, rtol=1e-5)
        assert torch.all(out[b, n:] == 0)
        for s, a in zip(as_tuple(state), as_tuple(alone_state), strict=True):
            torch.testing.assert_close(s[:, b], a[:, 0], atol=1e-5, rtol=1e-5)


def test_peephole_with_zero_peepholes_is_the_lstm():
    peep = RNN("peephole_lstm", I, H, 2, backend="scratch")
    lstm = RNN("lstm", I, H, 2, backend="scratch")
    state = {k: v for k, v in peep.state_dict().items() if "weight_c" not in k}
    lstm.load_state_dict(state)
    with torch.no_grad():
        for name, p in peep.named_parameters():
            if "weight_c" in name:
                p.zero_()
    x = torch.randn(B, T, I)
    torch.testing.assert_close(peep(x)[0], lstm(x)[0])
    with torch.no_grad():
        peep.cells[0].weight_cf.fill_(0.5)
    assert not torch.allclose(peep(x)[0], lstm(x)[0])  # the peepholes do act


def test_peephole_gradcheck():
    layer = RNN("peephole_lstm", 2, 3, 1, backend="scratch").double()
    x = torch.randn(2, 3, 2, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda inp: layer(inp)[0], (x,))


def test_peephole_has_no_fused_backend():
    with pytest.raises(ValueError, match="no fused backend"):
        RNN("peephole_lstm", I, H, backend="fused")


@pytest.mark.parametrize("cell", CELL_NAMES)
def test_shapes_and_dropout_between_layers(cell):
    layer = RNN(cell, I, H, 3, dropout=0.5, bidirectional=True, backend="scratch")
    out, state = layer(torch.randn(B, T, I))
    assert out.shape == (B, T, 2 * H)
    for s in as_tuple(state):
        assert s.shape == (3 * 2, B, H)
    layer.eval()
    x = torch.randn(B, T, I)
    assert torch.equal(layer(x)[0], layer(x)[0])  # no dropout in eval mode


def test_bad_inputs_are_reported():
    layer = RNN("lstm", I, H, 2)
    with pytest.raises(ValueError, match=r"expected input of shape \(B, T, 5\)"):
        layer(torch.randn(B, T, I + 1))
    with pytest.raises(ValueError, match="tuple"):
        layer(torch.randn(B, T, I), torch.zeros(2, B, H))
    with pytest.raises(ValueError, match="unknown cell"):
        RNN("lstn", I, H)
