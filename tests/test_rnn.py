"""seqlab.nn.rnn: scratch cells equal PyTorch's fused modules; lengths, conversion, peepholes, dropout."""

import pytest
import torch
from torch import nn

from devices import DEVICES
from seqlab.nn.cells import PeepholeLSTMCell, make_cell
from seqlab.nn.rnn import RNN
from seqlab.nn.rnn_fused import fused_to_scratch_state_dict, scratch_to_fused_state_dict

ATOL = 1e-5
#: cuDNN sums (gradients over time and batch) in another order: fp32 rounding of ~1.5e-5
CUDA_ATOL = 5e-5
B, T, I, H = 3, 6, 4, 5
FUSED_CELLS = ["rnn", "rnn_relu", "gru", "lstm"]


def torch_reference(cell: str, num_layers: int, bidirectional: bool) -> nn.RNNBase:
    """The PyTorch module that ``cell`` must reproduce."""
    if cell in ("rnn", "rnn_relu"):
        nonlinearity = "tanh" if cell == "rnn" else "relu"
        return nn.RNN(
            I,
            H,
            num_layers,
            nonlinearity=nonlinearity,
            batch_first=True,
            bidirectional=bidirectional,
        )
    module = nn.GRU if cell == "gru" else nn.LSTM
    return module(I, H, num_layers, batch_first=True, bidirectional=bidirectional)


def random_state(
    cell: str, num_layers: int, num_directions: int, batch_size: int = B, device="cpu"
):
    shape = (num_layers * num_directions, batch_size, H)
    if cell in ("lstm", "peephole_lstm"):
        return (torch.randn(shape).to(device), torch.randn(shape).to(device))
    return torch.randn(shape).to(device)


def as_tuple(state):
    return (state,) if isinstance(state, torch.Tensor) else tuple(state)


def scalar_loss(output, state, weights):
    """A loss that depends on every output and every final state entry, asymmetrically."""
    loss = (output * weights[0]).sum()
    for s, w in zip(as_tuple(state), weights[1:], strict=True):
        loss = loss + (s * w).sum()
    return loss


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("num_layers", [1, 2, 3])
@pytest.mark.parametrize("cell", FUSED_CELLS)
def test_scratch_matches_torch_outputs_states_and_gradients(
    cell, num_layers, bidirectional, device
):
    atol = ATOL if device == "cpu" else CUDA_ATOL
    # a weight's gradient sums B·T products: cuDNN's order of summing differs by its size
    rtol = 0 if device == "cpu" else 1e-4
    num_directions = 2 if bidirectional else 1
    reference = torch_reference(cell, num_layers, bidirectional)
    fused = RNN(cell, I, H, num_layers, bidirectional=bidirectional, backend="fused")
    fused.fused.load_state_dict(reference.state_dict())
    reference, fused = reference.to(device), fused.to(device)
    scratch = fused.to_backend("scratch")
    assert scratch.backend == "scratch"

    x = torch.randn(B, T, I).to(device)
    state = random_state(cell, num_layers, num_directions, device=device)
    weights = [torch.randn(B, T, num_directions * H).to(device)] + [
        torch.randn(num_layers * num_directions, B, H).to(device) for _ in as_tuple(state)
    ]
    x_ref, x_scr = x.clone().requires_grad_(), x.clone().requires_grad_()
    state_ref = tuple(s.clone().requires_grad_() for s in as_tuple(state))
    state_scr = tuple(s.clone().requires_grad_() for s in as_tuple(state))

    out_ref, final_ref = reference(x_ref, state_ref[0] if len(state_ref) == 1 else state_ref)
    out_scr, final_scr = scratch(x_scr, state_scr[0] if len(state_scr) == 1 else state_scr)
    assert out_scr.shape == (B, T, num_directions * H)
    assert isinstance(final_scr, torch.Tensor) == (cell not in ("lstm", "peephole_lstm"))
    torch.testing.assert_close(out_scr, out_ref, atol=atol, rtol=0)
    for a, b in zip(as_tuple(final_scr), as_tuple(final_ref), strict=True):
        torch.testing.assert_close(a, b, atol=atol, rtol=0)

    scalar_loss(out_ref, final_ref, weights).backward()
    scalar_loss(out_scr, final_scr, weights).backward()
    torch.testing.assert_close(x_scr.grad, x_ref.grad, atol=atol, rtol=0)
    for a, b in zip(state_scr, state_ref, strict=True):
        torch.testing.assert_close(a.grad, b.grad, atol=atol, rtol=0)
    scratch_grads = {name: p.grad for name, p in scratch.named_parameters()}
    converted = scratch_to_fused_state_dict(scratch_grads, num_layers, bidirectional)
    reference_grads = {f"fused.{name}": p.grad for name, p in reference.named_parameters()}
    assert converted.keys() == reference_grads.keys()
    for name, grad in reference_grads.items():
        torch.testing.assert_close(
            converted[name], grad, atol=atol, rtol=rtol, msg=lambda m, name=name: f"{name}: {m}"
        )


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("cell", FUSED_CELLS)
def test_conversion_round_trips_exactly(cell, bidirectional, device):
    atol = ATOL if device == "cpu" else CUDA_ATOL
    scratch = RNN(cell, I, H, num_layers=2, bidirectional=bidirectional).to(device)
    fused = scratch.to_backend("fused")
    back = fused.to_backend("scratch")
    original = scratch.state_dict()
    assert back.state_dict().keys() == original.keys()
    for name, tensor in back.state_dict().items():
        assert torch.equal(tensor, original[name]), name
    # the functions are inverse of each other on the raw dicts too
    raw = fused_to_scratch_state_dict(
        scratch_to_fused_state_dict(original, 2, bidirectional), 2, bidirectional
    )
    assert all(raw[k] is original[k] for k in original)
    # and the converted module computes the same function
    x = torch.randn(B, T, I).to(device)
    out_scratch, _ = scratch(x)
    out_fused, _ = fused(x)
    torch.testing.assert_close(out_fused, out_scratch, atol=atol, rtol=0)


def test_to_backend_keeps_dtype_and_copies_weights():
    scratch = RNN("lstm", I, H).double()
    fused = scratch.to_backend("fused")
    assert fused.fused.weight_ih_l0.dtype == torch.float64
    with torch.no_grad():
        fused.fused.weight_ih_l0.zero_()
    assert scratch.cells[0].weight_ih.abs().sum() > 0  # an independent copy


BACKEND_CELLS = [
    ("scratch", c)
    for c in ["rnn", "gru", "gru_reset_before", "output_gated_rnn", "lstm", "peephole_lstm"]
] + [("fused", c) for c in ["rnn", "gru", "lstm"]]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize(("backend", "cell"), BACKEND_CELLS)
def test_variable_lengths_equal_running_each_sequence_alone(backend, cell, bidirectional, device):
    atol = ATOL if device == "cpu" else CUDA_ATOL
    num_layers, num_directions = 2, 2 if bidirectional else 1
    rnn = RNN(cell, I, H, num_layers, bidirectional=bidirectional, backend=backend).to(device)
    lengths = torch.tensor([4, 7, 1, 5], device=device)
    x = torch.randn(4, 7, I).to(device)
    padded = x.clone()
    for b, n in enumerate(lengths.tolist()):
        padded[b, n:] = 99.0  # whatever is in the padding must not leak into the results
    state = random_state(cell, num_layers, num_directions, batch_size=4, device=device)
    output, final = rnn(padded, state, lengths=lengths)
    for b, n in enumerate(lengths.tolist()):
        alone_state = tuple(s[:, b : b + 1] for s in as_tuple(state))
        alone_out, alone_final = rnn(
            x[b : b + 1, :n], alone_state[0] if len(alone_state) == 1 else alone_state
        )
        torch.testing.assert_close(output[b : b + 1, :n], alone_out, atol=atol, rtol=0)
        assert torch.all(output[b, n:] == 0), "padded positions must be zero"
        for batched, single in zip(as_tuple(final), as_tuple(alone_final), strict=True):
            torch.testing.assert_close(batched[:, b : b + 1], single, atol=atol, rtol=0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("backend", ["scratch", "fused"])
def test_full_lengths_equal_no_lengths(backend, device):
    atol = ATOL if device == "cpu" else CUDA_ATOL
    rnn = RNN("gru", I, H, num_layers=2, bidirectional=True, backend=backend).to(device)
    x = torch.randn(B, T, I).to(device)
    out_plain, h_plain = rnn(x)
    out_len, h_len = rnn(x, lengths=torch.full((B,), T, device=device))
    torch.testing.assert_close(out_len, out_plain, atol=atol, rtol=0)
    torch.testing.assert_close(h_len, h_plain, atol=atol, rtol=0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "cell", ["rnn", "gru", "gru_reset_before", "output_gated_rnn", "lstm", "peephole_lstm"]
)
def test_stepping_a_cell_by_hand_equals_the_layer(cell, device):
    rnn = RNN(cell, I, H).to(device)
    x = torch.randn(B, T, I).to(device)
    output, _ = rnn(x)
    step_cell = rnn.cells[0]
    state = step_cell.zero_state(B, device=device)
    for t in range(T):
        state = step_cell(x[:, t], state)
        torch.testing.assert_close(state[0], output[:, t], atol=ATOL, rtol=0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("bidirectional", [False, True])
def test_peephole_lstm_with_zero_peepholes_equals_lstm(bidirectional, device):
    lstm = RNN("lstm", I, H, num_layers=2, bidirectional=bidirectional)
    peephole = RNN("peephole_lstm", I, H, num_layers=2, bidirectional=bidirectional)
    state_dict = dict(lstm.state_dict())
    for key, value in peephole.state_dict().items():
        if key not in state_dict:  # weight_ci / weight_cf / weight_co
            state_dict[key] = torch.zeros_like(value)
    peephole.load_state_dict(state_dict)
    lstm, peephole = lstm.to(device), peephole.to(device)
    x = torch.randn(B, T, I).to(device)
    out_lstm, (h_lstm, c_lstm) = lstm(x)
    out_peep, (h_peep, c_peep) = peephole(x)
    torch.testing.assert_close(out_peep, out_lstm, atol=ATOL, rtol=0)
    torch.testing.assert_close(h_peep, h_lstm, atol=ATOL, rtol=0)
    torch.testing.assert_close(c_peep, c_lstm, atol=ATOL, rtol=0)


def test_peephole_gates_see_previous_cell_and_output_gate_sees_new_cell():
    """One step computed by hand: i, f read c_{t-1}; o reads c_t (Gers & Schmidhuber 2000)."""
    cell = PeepholeLSTMCell(I, H).double()
    x = torch.randn(B, I, dtype=torch.float64)
    h0 = torch.randn(B, H, dtype=torch.float64)
    c0 = torch.randn(B, H, dtype=torch.float64)
    gates = x @ cell.weight_ih.T + cell.bias_ih + h0 @ cell.weight_hh.T + cell.bias_hh
    a_i, a_f, a_g, a_o = gates.detach().split(H, dim=1)
    i = torch.sigmoid(a_i + cell.weight_ci.detach() * c0)
    f = torch.sigmoid(a_f + cell.weight_cf.detach() * c0)
    c1 = f * c0 + i * torch.tanh(a_g)
    o = torch.sigmoid(a_o + cell.weight_co.detach() * c1)
    h1, c1_cell = cell(x, (h0, c0))
    torch.testing.assert_close(c1_cell, c1)
    torch.testing.assert_close(h1, o * torch.tanh(c1))
    # a gate wired to c_{t-1} instead of c_t would give a different h
    o_wrong = torch.sigmoid(a_o + cell.weight_co.detach() * c0)
    assert not torch.allclose(h1, o_wrong * torch.tanh(c1))


def test_peephole_lstm_gradcheck():
    rnn = RNN("peephole_lstm", 2, 3, num_layers=2, bidirectional=True).double()
    names = [name for name, _ in rnn.named_parameters()]
    params = [p.detach().clone().requires_grad_() for p in rnn.parameters()]
    x = torch.randn(2, 3, 2, dtype=torch.float64, requires_grad=True)
    c0 = torch.randn(4, 2, 3, dtype=torch.float64, requires_grad=True)
    lengths = torch.tensor([3, 2])

    def run(x, c0, *params):
        h0 = torch.zeros_like(c0)
        output, (h, c) = torch.func.functional_call(
            rnn, dict(zip(names, params, strict=True)), (x, (h0, c0)), {"lengths": lengths}
        )
        return output, h, c

    assert torch.autograd.gradcheck(run, (x, c0, *params))


@pytest.mark.parametrize("backend", ["scratch", "fused"])
def test_dropout_only_between_layers(backend):
    x = torch.randn(B, T, I)
    one_layer = RNN("lstm", I, H, num_layers=1, dropout=0.5, backend=backend).train()
    out_train, _ = one_layer(x)
    out_eval, _ = one_layer.eval()(x)
    torch.testing.assert_close(out_train, out_eval)  # nothing after the last layer

    two_layers = RNN("lstm", I, H, num_layers=2, dropout=0.5, backend=backend).train()
    out_train, _ = two_layers(x)
    out_eval, _ = two_layers.eval()(x)
    assert not torch.allclose(out_train, out_eval, atol=1e-3)
    torch.testing.assert_close(two_layers(x)[0], out_eval)  # eval is deterministic


def test_invalid_arguments_fail_with_clear_messages():
    with pytest.raises(ValueError, match="no fused backend"):
        RNN("peephole_lstm", I, H, backend="fused")
    with pytest.raises(ValueError, match="unknown cell 'lstmm'"):
        RNN("lstmm", I, H)
    with pytest.raises(ValueError, match="unknown cell"):
        make_cell("elman", I, H)
    peephole = RNN("peephole_lstm", I, H)
    with pytest.raises(ValueError, match="peephole"):
        peephole.to_backend("fused")
    lstm = RNN("lstm", I, H, num_layers=2)
    x = torch.randn(B, T, I)
    with pytest.raises(ValueError, match=r"tuple \(h, c\)"):
        lstm(x, torch.zeros(2, B, H))
    with pytest.raises(ValueError, match="lengths must lie in"):
        lstm(x, lengths=torch.tensor([T, 0, 1]))
    with pytest.raises(ValueError, match="expected input of shape"):
        lstm(torch.randn(B, T, I + 1))
    with pytest.raises(ValueError, match="missing"):
        fused_to_scratch_state_dict(lstm.state_dict(), 2, False)


def test_reset_before_gru_against_its_equation_and_against_pytorchs_form():
    """d2l.ai §10.2.2: H̃ = tanh(X W_xh + (R ⊙ H) W_hh + b_h); PyTorch's nn.GRU:
    H̃ = tanh(X W_xh + R ⊙ (H W_hh + b))."""
    from seqlab.nn.cells import GRUCell, GRUResetBeforeCell

    before = GRUResetBeforeCell(I, H).double()
    x = torch.randn(B, I, dtype=torch.float64)
    h = torch.randn(B, H, dtype=torch.float64)
    wx_r, wx_z, wx_h = before.weight_ih.chunk(3)  # (H, I) each
    wh_r, wh_z, wh_h = before.weight_hh.chunk(3)  # (H, H) each
    bx_r, bx_z, bx_h = before.bias_ih.chunk(3)
    bh_r, bh_z, bh_h = before.bias_hh.chunk(3)
    r = torch.sigmoid(x @ wx_r.T + bx_r + h @ wh_r.T + bh_r)
    z = torch.sigmoid(x @ wx_z.T + bx_z + h @ wh_z.T + bh_z)
    candidate = torch.tanh(x @ wx_h.T + bx_h + (r * h) @ wh_h.T + bh_h)
    expected = z * h + (1 - z) * candidate
    (got,) = before(x, (h,))
    torch.testing.assert_close(got, expected)
    # the same weights in PyTorch's form give another function ...
    torch_form = GRUCell(I, H).double()
    torch_form.load_state_dict(before.state_dict())
    (other,) = torch_form(x, (h,))
    assert (other - got).abs().max() > 1e-3
    # ... that agrees when the reset gate is open (r = 1), whatever the candidate's bias b_hn:
    # r ⊙ (h W_hn + b_hn) and (r ⊙ h) W_hn + b_hn are then the same sum
    with torch.no_grad():
        for cell in (before, torch_form):
            cell.bias_hh[2 * H :] = 0.5  # b_hn far from 0
            cell.bias_ih[:H] = 1e3  # r = σ(large) = 1
    torch.testing.assert_close(before(x, (h,))[0], torch_form(x, (h,))[0])


def test_output_gated_rnn_against_its_equation():
    """ĥ_t = tanh(W_i x_t + W_h h_{t-1}), g_t = σ(U_g x_t + W_g h_{t-1}), h_t = ĥ_t ∘ g_t."""
    from seqlab.nn.cells import OutputGatedRNNCell

    cell = OutputGatedRNNCell(I, H).double()
    x = torch.randn(B, I, dtype=torch.float64)
    h = torch.randn(B, H, dtype=torch.float64)
    pre = x @ cell.weight_ih.T + cell.bias_ih + h @ cell.weight_hh.T + cell.bias_hh  # (B, 2H)
    g, candidate = pre[:, :H], pre[:, H:]
    (got,) = cell(x, (h,))
    torch.testing.assert_close(got, torch.tanh(candidate) * torch.sigmoid(g))
    assert cell.weight_ih.shape == (2 * H, I)


@pytest.mark.parametrize("cell", ["gru_reset_before", "output_gated_rnn", "peephole_lstm"])
def test_scratch_only_cells_refuse_the_fused_backend(cell):
    with pytest.raises(ValueError, match=f"cell '{cell}' has no fused backend"):
        RNN(cell, I, H, backend="fused")


# ------------------------------------------------------------ randomized truncated BPTT
def _grads_wrt_inputs(rnn, x):
    x = x.clone().requires_grad_(True)
    out, _ = rnn(x)
    out[:, -1].sum().backward()  # loss on the last step only
    return x.grad


def test_randomized_truncation_keeps_values_and_full_keep_is_regular():
    torch.manual_seed(0)
    regular = RNN("gru", I, H, num_layers=2).train()
    randomized = RNN("gru", I, H, num_layers=2, truncation_keep=0.5).train()
    randomized.load_state_dict(regular.state_dict())
    x = torch.randn(B, T, I)
    torch.testing.assert_close(randomized(x)[0], regular(x)[0])  # forward values unchanged
    everything = RNN("gru", I, H, num_layers=2, truncation_keep=1.0).train()
    everything.load_state_dict(regular.state_dict())
    torch.testing.assert_close(_grads_wrt_inputs(everything, x), _grads_wrt_inputs(regular, x))


def test_randomized_truncation_cuts_the_recurrent_path_and_is_unbiased():
    torch.manual_seed(0)
    regular = RNN("rnn", I, H).train()
    almost_never = RNN("rnn", I, H, truncation_keep=1e-9).train()
    almost_never.load_state_dict(regular.state_dict())
    x = torch.randn(B, 3, I)
    full = _grads_wrt_inputs(regular, x)  # (B, 3, I)
    cut = _grads_wrt_inputs(almost_never, x)
    assert cut[:, :2].abs().max() == 0  # nothing reaches back past one step
    torch.testing.assert_close(cut[:, 2], full[:, 2])  # the last input's own path is untouched
    # with π = 0.5 the gradient at step 0 is ξ_1 ξ_2 × the full one, ξ ∈ {0, 2}: mean 1
    half = RNN("rnn", I, H, truncation_keep=0.5).train()
    half.load_state_dict(regular.state_dict())
    draws = torch.stack([_grads_wrt_inputs(half, x)[:, 0] for _ in range(600)])  # (600, B, I)
    factors = (draws / full[None, :, 0]).flatten(1)  # each draw: one factor per sequence
    assert set(factors[:, ::I].round().unique().tolist()) <= {0.0, 4.0}
    assert abs(float(factors.mean()) - 1.0) < 0.2
    # not in evaluation mode, and never with the fused backend
    half.eval()
    torch.testing.assert_close(_grads_wrt_inputs(half, x), full)
    with pytest.raises(ValueError, match="randomized truncation needs backend='scratch'"):
        RNN("gru", I, H, backend="fused", truncation_keep=0.5)


@pytest.mark.parametrize("device", DEVICES)
def test_fused_layers_run_under_bf16_autocast_on_any_cpu_and_the_probe_draws_no_randoms(device):
    """oneDNN has no bf16 LSTM kernel on AVX2 CPUs: run_layer runs such a layer in float32
    (close to the float32 result); the one-off probe of the CPU's kernels
    leaves the caller's random numbers as they were. On CUDA, cuDNN's layers under bf16
    autocast give the float32 result to bf16's rounding too."""
    from seqlab.nn import rnn as rnn_module
    from seqlab.nn import rnn_fused

    rnn_fused._BF16_KERNEL.clear()
    torch.manual_seed(0)
    want = torch.rand(3)
    torch.manual_seed(0)
    rnn_fused.bf16_kernel(torch.nn.LSTM)
    assert torch.equal(torch.rand(3), want)
    for kind in (torch.nn.LSTM, torch.nn.GRU, torch.nn.RNN):
        torch.manual_seed(1)
        layer = kind(4, 5, batch_first=True).to(device)
        x = torch.randn(2, 6, 4).to(device)
        full, _ = rnn_module.run_layer(layer, x, lengths=torch.tensor([6, 3]))
        with torch.autocast(device, dtype=torch.bfloat16):
            low, _ = rnn_module.run_layer(layer, x, lengths=torch.tensor([6, 3]))
        torch.testing.assert_close(low.float(), full, atol=0.05, rtol=0)


@pytest.mark.parametrize("backend", ["scratch", "fused"])
@pytest.mark.parametrize("num_layers", [1, 2])
@pytest.mark.parametrize("cell", FUSED_CELLS)
def test_forward_half_never_sees_the_future_backward_half_does(cell, num_layers, backend):
    """d2l.ai §10.4: the forward state at step t reads x_1..x_t only; the backward one reads
    x_t..x_T. Stacked, the forward half of layer 2 reads layer 1's backward half: the future."""
    torch.manual_seed(0)
    x = torch.randn(B, T, I)
    later = x.clone()
    later[:, 4:] += 1.0  # change steps 5 and 6 only
    forward = RNN(cell, I, H, num_layers, backend=backend)
    torch.testing.assert_close(forward(later)[0][:, :4], forward(x)[0][:, :4], rtol=0, atol=0)
    both = RNN(cell, I, H, num_layers, bidirectional=True, backend=backend)
    moved = (both(later)[0] - both(x)[0])[:, :4].abs()  # (B, 4, 2H)
    assert (moved[..., H:].amax(dim=(0, 2)) > 0).all()  # every earlier step's backward half
    if num_layers == 1:
        assert moved[..., :H].max() == 0
    else:
        assert moved[..., :H].max() > 1e-3  # through layer 1's backward half


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("cell", ["rnn", "gru", "lstm", "peephole_lstm"])
def test_a_deep_rnn_is_its_layers_chained(cell, bidirectional, device):
    """d2l.ai §10.3: H^(l)_t = f(H^(l-1)_t, H^(l)_{t-1}); layer l reads layer l-1's outputs."""
    torch.manual_seed(0)
    d = 2 if bidirectional else 1
    deep = RNN(cell, I, H, num_layers=3, bidirectional=bidirectional).to(device)
    x = torch.randn(B, T, I).to(device)
    out, state = deep(x)
    layer_input, finals = x, []
    for layer in range(3):
        one = RNN(cell, layer_input.size(-1), H, bidirectional=bidirectional).to(device)
        for direction in range(d):
            one.cells[direction].load_state_dict(deep.cells[layer * d + direction].state_dict())
        layer_input, final = one(layer_input)
        finals.append(as_tuple(final))
    torch.testing.assert_close(layer_input, out)
    for i, s in enumerate(as_tuple(state)):
        torch.testing.assert_close(torch.cat([f[i] for f in finals]), s)
