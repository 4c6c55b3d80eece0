"""Learning-rate schedules: recipes keep their shape on any machine."""

import math

import pytest
import torch

from seqlab.config import TrainConfig, load_config
from seqlab.config.files import PACKAGED_CONFIGS
from seqlab.objective import Selection
from seqlab.training.optim import LRSchedule, Plateau, lr_multiplier


def curve(cfg, total_steps, steps_done, seconds_per_step, budget_s):
    """f(s) for s = 0 .. steps_done - 1 on a machine taking ``seconds_per_step``."""
    clock = {"s": 0}
    f = lr_multiplier(cfg, total_steps, lambda: clock["s"] * seconds_per_step / budget_s)
    out = []
    for s in range(steps_done):
        clock["s"] = s + 1  # the time used once step s + 1 is done
        out.append(f(s))
    return out


@pytest.mark.parametrize("slowdown", [1.0, 3.0])
def test_a_time_budgeted_recipe_warms_up_and_anneals_on_a_slower_machine(slowdown):
    cfg = TrainConfig(schedule="cosine", warmup_fraction=0.35, min_lr_ratio=0.1, epochs=20)
    total, budget = 2000, 100.0  # the tuning machine does 2000 steps in 95 s: step-bound
    steps = int(budget / (0.0475 * slowdown))  # how many steps fit in the time budget
    steps = min(steps, total)
    f = curve(cfg, total, steps, 0.0475 * slowdown, budget)
    peak = max(range(steps), key=lambda s: f[s])
    assert peak / steps == pytest.approx(0.35, abs=0.02)  # warm-up ends at the same share
    assert f[-1] == pytest.approx(0.1, abs=0.02)  # and the run ends annealed
    assert all(b >= a for a, b in zip(f[:peak], f[1 : peak + 1], strict=True))


def test_warmup_in_steps_on_a_slower_machine_never_leaves_warmup():
    """The old recipe, for contrast: 800 warm-up steps do not fit when the machine is slower."""
    cfg = TrainConfig(schedule="cosine", warmup_steps=800, min_lr_ratio=0.1)
    f = curve(cfg, 2200, 700, 1.0, 700.0)  # the time budget holds 700 steps
    assert max(f) < 0.9


def test_inverse_sqrt_peaks_at_the_warmup_step():
    cfg = TrainConfig(schedule="inverse_sqrt", warmup_steps=100)
    f = lr_multiplier(cfg, 1000)
    assert f(99) == 1.0 and f(0) == pytest.approx(0.01) and f(399) == pytest.approx(0.5)


def test_plateau_halves_the_rate_by_the_shared_selection_rule():
    model = torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    schedule = LRSchedule(opt, TrainConfig(lr=1.0, schedule="plateau"), 100)
    plateau = Plateau(schedule, Selection("val_bleu", "max"), patience=1)
    for bleu in (10.0, 12.0, 11.0, 11.5, float("nan")):
        plateau.step(bleu)
    assert schedule.lr == 0.5 and opt.param_groups[0]["lr"] == 0.5  # 2 evaluations without gain
    state = schedule.state_dict()
    fresh = LRSchedule(opt, TrainConfig(lr=1.0, schedule="plateau"), 100)
    fresh.load_state_dict(state)
    assert fresh.lr == 0.5


def test_selection_never_prefers_a_non_finite_value():
    lower = Selection("val_loss", "min")
    assert lower.better(1.0, None) and lower.better(1.0, 2.0) and not lower.better(2.0, 1.0)
    assert not lower.better(math.nan, 2.0) and not lower.better(math.inf, None)
    assert lower.better(3.0, math.nan)


def test_every_shipped_config_validates_and_asks_the_hardware():
    for path in sorted(PACKAGED_CONFIGS.glob("*.yaml")):
        cfg = load_config(path)
        assert cfg.train.precision in ("auto", "fp32"), path  # never a forced bf16
        assert cfg.decode.precision == "fp32", path  # inference: fp32 on every machine
