"""Weight averaging, dev-set probing and the step an RL run ends on (arcforge.train.step_select),
and the trainers' shared resumable state (arcforge.train.resume), on a two-weight model."""

from __future__ import annotations

import json

import torch

from arcforge.config import OptimCfg
from arcforge.train.optim import build_optimizer
from arcforge.train.resume import TrainerState
from arcforge.train.step_select import StepProbe, WeightEMA, kept_probe


class Probe:
    every = 2
    keep = "best"


def tiny(w: float = 0.0) -> torch.nn.Linear:
    m = torch.nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        m.weight.fill_(w)
    return m


def test_weight_ema_follows_the_polyak_average_and_restores_the_online_weights():
    m = tiny(0.0)
    ema = WeightEMA(m, decay=0.5)
    with torch.no_grad():
        m.weight.fill_(4.0)
    ema.update(m)  # 0.5 * 0 + 0.5 * 4 = 2
    with torch.no_grad():
        m.weight.fill_(6.0)
    ema.update(m)  # 0.5 * 2 + 0.5 * 6 = 4
    torch.testing.assert_close(ema.avg["weight"], torch.tensor([[4.0]]))
    with ema.applied(m):
        assert m.weight.item() == 4.0
    assert m.weight.item() == 6.0


def test_step_probe_keeps_the_best_weights_and_ends_on_them(tmp_path):
    """Probes at steps 0, 2, 4 score 0.2, 0.9, 0.5: with keep "best" the run ends on step 2's
    weights and step 4's are set aside; probe.jsonl has one row per probe."""
    scores = iter([0.2, 0.9, 0.5])
    m = tiny(0.0)
    probe = StepProbe(lambda _: {"dev": [next(scores)]}, Probe(), tmp_path, steps=4)
    for done in range(5):
        with torch.no_grad():
            m.weight.fill_(float(done))
        if probe.due(done):
            probe.run(m, done)
    probe.saved()
    assert [p.name for p in (tmp_path / "probe").glob("best-*")] == ["best-2.safetensors"]
    probe.select(m)
    assert m.weight.item() == 2.0
    assert (tmp_path / "probe" / "last-4.safetensors").exists()
    rows = [json.loads(x) for x in (tmp_path / "probe.jsonl").read_text().splitlines()]
    assert [(r["step"], r["best"]) for r in rows] == [(0, True), (2, True), (4, False)]


def test_trainer_state_restores_weights_optimizer_step_and_extra(tmp_path):
    m = tiny(1.0)
    opt = build_optimizer(m, OptimCfg(lr=0.1))
    fresh = TrainerState(tmp_path, m, opt)
    assert (fresh.resumed, fresh.step, fresh.info, fresh.metrics_resume_step) == (
        False,
        0,
        {},
        None,
    )
    m(torch.ones(1, 1)).sum().backward()
    opt.step()
    fresh.save(3, {"cursor": 7}, {"ema": {"w": torch.tensor([2.0])}})
    w = m.weight.item()
    expected = torch.rand(1)  # the draw right after the save: the RNG state comes back too
    torch.manual_seed(123)
    m2 = tiny(0.0)
    opt2 = build_optimizer(m2, OptimCfg(lr=0.1))
    again = TrainerState(tmp_path, m2, opt2)
    assert (again.resumed, again.step, again.info["cursor"], again.metrics_resume_step) == (
        True,
        3,
        7,
        3,
    )
    assert m2.weight.item() == w and len(opt2.state) == 1
    torch.testing.assert_close(again.tensors("ema")["w"], torch.tensor([2.0]))
    assert again.tensors("missing") is None
    assert torch.rand(1).item() == expected.item()
    assert again.checkpoint_if_due(4, total=10, every=5, stop_after=4)  # stop: saved at 4
    m3 = tiny()
    assert TrainerState(tmp_path, m3, build_optimizer(m3, OptimCfg())).step == 4


def _rows(*items: list[float]) -> list[dict]:
    """probe.jsonl rows at steps 0, 1, ... with these item scores on one dev suite."""
    return [{"step": i, "mean": sum(x) / len(x), "items_dev": x} for i, x in enumerate(items)]


def test_kept_probe_ends_on_the_last_step_unless_it_fell_beyond_its_interval():
    """The best probe (step 1) solves all 20 items. Losing 3 of them at the last step is a
    paired change of -0.15 [-0.31, +0.01], within its interval: the last step is kept. Losing
    6 is -0.30 [-0.51, -0.09]: the best step is kept."""
    start, best = [1.0] * 10 + [0.0] * 10, [1.0] * 20
    small, big = [0.0] * 3 + [1.0] * 17, [0.0] * 6 + [1.0] * 14
    assert kept_probe(_rows(start, best, small), "last_unless_worse")["step"] == 2
    assert kept_probe(_rows(start, best, big), "last_unless_worse")["step"] == 1
    assert kept_probe(_rows(start, best, small), "best")["step"] == 1
    assert kept_probe(_rows(start, best, big), "last")["step"] == 2
    # ties go to the earlier step, and a run whose best is its last keeps it under every rule
    assert kept_probe(_rows(best, best, small), "best")["step"] == 0
    assert {
        kept_probe(_rows(start, small, best), k)["step"]
        for k in ("best", "last", "last_unless_worse")
    } == {2}
    old = [{k: v for k, v in r.items() if k != "items_dev"} for r in _rows(start, best, small)]
    assert kept_probe(old, "last_unless_worse")["step"] == 1  # no items to pair: the best
    assert kept_probe([], "best") is None
