"""Published claims, measured: positional encoding (Vaswani et al. 2017, §3.5), √d_k scaling
(§3.2.1), the worked self-attention example (Alammar's "The Illustrated Transformer"), the training
choices of d2l.ai ch. 9, and the demo list."""

import subprocess
import sys

import pytest
import torch

from seqlab.analysis.attention_scaling import measure
from seqlab.analysis.positional import (
    binary_table,
    cosine_similarities,
    offset_spread,
    predicted_cosine,
)
from seqlab.analysis.self_attention_example import worked_example
from seqlab.demos import DEMOS
from seqlab.nn.positional_encoding import sinusoidal_table


@pytest.mark.parametrize("d_model", [8, 32, 128])
def test_cosine_similarity_of_positions_depends_on_the_offset_only(d_model):
    table = sinusoidal_table(200, d_model)
    sim = cosine_similarities(table)  # (200, 200)
    assert float(offset_spread(sim).max()) < 1e-6  # same value along every diagonal
    offsets = torch.arange(200)
    measured = torch.stack([sim.diagonal(k)[0] for k in range(200)])
    # (2/d) Σ_i cos(k ω_i): the per-frequency value is cos(k/f_i)
    torch.testing.assert_close(measured, predicted_cosine(offsets, d_model), atol=1e-6, rtol=0)

    # a derivation that drops a term ends in cos(k/f) - sin(k/f) sin(t/f) cos(t/f), which still
    # depends on t: the measurement tells the two apart
    def dropped_term(t, k=1.0):
        t, k = torch.tensor(t), torch.tensor(k)
        return float(torch.cos(k) - torch.sin(k) * torch.sin(t) * torch.cos(t))

    assert abs(dropped_term(1.0) - dropped_term(2.0)) > 0.5


def test_binary_codes_lowest_bit_first():
    assert binary_table(4, 2).tolist() == [[0, 0], [1, 0], [0, 1], [1, 1]]


def test_scaling_keeps_score_variance_at_one_and_the_softmax_gradient_alive():
    result = measure([4, 64, 1024], samples=1500)
    raw, scaled = result["unscaled"], result["scaled"]
    for d, var in zip(result["widths"], raw["variance"], strict=True):
        assert var == pytest.approx(d, rel=0.15)  # var(q·k) = d
    assert all(v == pytest.approx(1.0, rel=0.15) for v in scaled["variance"])
    assert raw["max_weight"][-1] > 0.9 and scaled["max_weight"][-1] < 0.4  # saturation
    assert raw["jacobian"][-1] < 0.25 * raw["jacobian"][0]  # the gradient vanishes unscaled
    assert scaled["jacobian"][-1] == pytest.approx(scaled["jacobian"][0], rel=0.1)


def test_worked_example_divides_by_8_and_matches_the_module():
    steps = worked_example(log=lambda *_: None)
    assert steps["d_k"] == 64 and steps["divisor"] == 8.0
    assert steps["scaled"] == pytest.approx([s / 8 for s in steps["scores"]])
    assert sum(steps["softmax"]) == pytest.approx(1.0)
    assert steps["max_abs_error"] < 1e-5 and steps["weight_error"] < 1e-6


def test_demo_list_names_every_demo_with_its_source():
    out = subprocess.run(
        [sys.executable, "-m", "seqlab", "demo", "--list"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    for name, demo in DEMOS.items():
        line = next(x for x in out.stdout.splitlines() if x.startswith(name + " "))
        assert demo.source in line and demo.section in line
    help_text = subprocess.run(
        [sys.executable, "-m", "seqlab", "demo", "--help"], capture_output=True, text=True
    ).stdout
    for name in DEMOS:
        assert name in help_text  # every listed demo is a real subcommand


def test_sequential_operations_and_path_lengths_measured_from_the_layers():
    from seqlab.analysis.layer_paths import measure

    for n in (4, 8):
        cnn, rnn, att = (measure(k, n) for k in ("cnn", "rnn", "self_attention"))
        assert rnn["sequential"] == n and rnn["path"] == n and rnn["depth"] == 1  # O(n), O(n)
        assert cnn["sequential"] == 1 and cnn["depth"] == -(-(n - 1) // 2)  # O(1), O(n/k), k 5
        assert (
            att["depth"] == 1
            and att["sequential"] == measure("self_attention", 2 * n)["sequential"]
        )  # O(1), O(1)


# ------------------------------------------------ training claims of d2l.ai ch. 9, measured
class _Toy:
    """Four minibatches of ``(x (2, 3), y (2,))`` for a one-layer recurrent toy."""

    def __init__(self, carries_state):
        self.carries_state = carries_state
        g = torch.Generator().manual_seed(0)
        self.batches = [(torch.randn(2, 3, 4, generator=g) * 10, torch.randn(2)) for _ in range(4)]

    def set_epoch(self, epoch):
        pass

    def __len__(self):
        return len(self.batches)

    def __iter__(self):
        return iter(self.batches)


def _fit(tmp_path, carries_state, grad_clip):
    from seqlab.config import TrainConfig
    from seqlab.training.trainer import Callback, LossOutput, Trainer

    torch.manual_seed(0)
    rnn = torch.nn.RNN(4, 5, batch_first=True)
    seen_states, norms = [], []

    def loss_fn(model, batch, state):
        seen_states.append(state)
        x, y = batch
        out, h = model(x, state)  # (2, 3, 5), (1, 2, 5)
        return LossOutput(((out[:, -1].sum(-1) - y) ** 2).mean() * 100, 2, h)

    class Norms(Callback):
        def on_step(self, trainer, loss):
            grads = [p.grad.norm() for p in trainer.model.parameters() if p.grad is not None]
            norms.append(float(torch.stack(grads).norm()))

    cfg = TrainConfig(optimizer="sgd", lr=0.01, epochs=2, grad_clip=grad_clip, log_every=100)
    Trainer(rnn, loss_fn, _Toy(carries_state), cfg, tmp_path / "run", callbacks=[Norms()]).fit()
    return seen_states, norms


def test_clipping_bounds_the_global_gradient_norm(tmp_path):
    _, unclipped = _fit(tmp_path / "a", True, None)
    _, clipped = _fit(tmp_path / "b", True, 0.5)
    assert max(unclipped) > 0.5  # the bound is active
    assert max(clipped) <= 0.5 * (1 + 1e-5)  # ‖g‖ ≤ θ after g ← min(1, θ/‖g‖) g


def test_random_sampling_starts_each_minibatch_from_a_fresh_state(tmp_path):
    random_states, _ = _fit(tmp_path / "r", False, 1.0)
    assert all(s is None for s in random_states)  # every minibatch: a new initial state
    sequential_states, _ = _fit(tmp_path / "s", True, 1.0)
    assert sequential_states[0] is None
    carried = sequential_states[1:4]
    assert all(s is not None and not s.requires_grad for s in carried)  # carried, detached


def test_perplexity_of_uniform_logits_is_the_vocabulary_size():
    from seqlab.tasks.language_modeling import evaluate_lm

    class Uniform(torch.nn.Module):
        def __init__(self, vocab):
            super().__init__()
            self.vocab = vocab
            self.dummy = torch.nn.Parameter(torch.zeros(1))

        def forward(self, x, state=None):
            return torch.zeros(*x.shape, self.vocab) + self.dummy, None

    for vocab in (2, 28, 1000):
        ids = torch.randint(0, vocab, (500,))
        assert evaluate_lm(Uniform(vocab), ids, 4, 10)["val_ppl"] == pytest.approx(vocab)
