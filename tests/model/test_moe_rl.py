"""MoE in training and RL: the LocalEngine records each completion's routing during generation,
reasoning RL replays it in the policy's forwards (`routing_replay`), the LM loop logs the
expert load with the balancer off, the report shows it, and the int8 engine runs GLM-5's DSA."""

import json

import pytest
import torch
import yaml
from pydantic import ValidationError
from tiny_models import glm5_two_layers, small_llama

from arcforge.config import EngineCfg, OptimCfg
from arcforge.errors import ConfigError
from arcforge.metrics import read_rows
from arcforge.model.checkpoint import init_model
from arcforge.model.moe import load_stats, record_routing, routers
from arcforge.model.presets import build_config
from arcforge.report import write_report
from arcforge.rollout.engines.base import SamplingParams
from arcforge.rollout.engines.factory import make_engine
from arcforge.rollout.engines.local import LocalEngine
from arcforge.rollout.prompts import RLPrompt
from arcforge.stages.rl import RLStageCfg
from arcforge.train.loop import Phase, train_loop
from arcforge.train.rl import (
    PromptStream,
    collect_rollouts,
    policy_backward,
    train_rl,
)
from arcforge.train.rollout_batch import pad_trajectories, trajectory_from_completion
from arcforge.types import Reward

V, PAD = 64, 0
PROMPTS = [[5, 6, 7, 8, 9, 10, 11], [3, 4], list(range(12, 30))]  # left-padded in one batch
STOPS = tuple(range(1, V, 5))  # rows stop at different steps and leave the decode batch

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def glm5():
    return init_model(glm5_two_layers(V), seed=0).eval()


def trainer_routing(model, prompt: list[int], completion: list[int]) -> torch.Tensor:
    """Router 0's (L - 1, k) experts in a full-sequence forward over prompt + completion[:-1]:
    what the trainer's teacher-forced forward picks."""
    with torch.no_grad(), record_routing(model) as rec:
        model(input_ids=torch.tensor([prompt + completion[:-1]]))
    return rec.experts[0][0]


def rl_cfg(**overrides) -> RLStageCfg:
    """A one-step reasoning-RL config: 2 prompts × 2 samples of up to 6 tokens, replay on."""
    optim = OptimCfg(lr=1e-3, warmup_steps=0, min_lr_ratio=1.0, weight_decay=0.0)
    settings = {"name": "rl", "kind": "rl", "sources": [{"source": "jsonl:unused"}], "steps": 1}
    settings |= {"prompts_per_step": 2, "group_size": 2, "temperature": 1.0, "max_new_tokens": 6}
    settings |= {"micro_batch": 2, "max_refill_tries": 0, "optim": optim, "routing_replay": True}
    return RLStageCfg(**{**settings, **overrides})


def share_of_even_tokens(prompts: list[RLPrompt], comps) -> list[Reward]:
    """A reward that varies within a group (random policy): no group is dropped as uniform."""
    return [Reward(sum(t % 2 == 0 for t in c.token_ids) / len(c.token_ids)) for c in comps]


class ShiftedRouting(LocalEngine):
    """A LocalEngine whose completions report the next experts (e + 1 mod E) in place of the
    ones it routed to: a corrupted routing record."""

    def generate(self, prompts, params):
        outs = super().generate(prompts, params)
        for c in outs:
            c.routing = [(experts + 1) % 8 for experts in c.routing]
        return outs


def test_recorded_routing_is_what_the_full_sequence_forward_picks(glm5):
    # fp32 greedy and sampled, rows stopping early: the prefill and every decode step route
    # each token to exactly the experts a teacher-forced forward over the whole sequence picks
    engine = LocalEngine(glm5, pad_token_id=PAD, record_routing=True)
    greedy = SamplingParams(max_new_tokens=10, temperature=0, stop_token_ids=STOPS)
    sampled = SamplingParams(max_new_tokens=12, seed=3, n=3, stop_token_ids=STOPS)
    outs = engine.generate(PROMPTS, greedy) + engine.generate(PROMPTS, sampled)
    prompts = PROMPTS + [p for p in PROMPTS for _ in range(3)]
    assert {c.finish_reason for c in outs} == {"stop", "length"}
    for prompt, c in zip(prompts, outs):
        (got,) = c.routing  # one MoE layer
        assert got.shape == (len(prompt) + len(c.token_ids) - 1, 2)
        assert torch.equal(got, trainer_routing(glm5, prompt, c.token_ids))
    assert LocalEngine(glm5, pad_token_id=PAD).generate(PROMPTS, greedy)[0].routing is None


def test_int8_engine_generates_with_the_glm5_model(glm5):
    # DSA's indexer takes its input dtype from weights_proj, a Linear the int8 quantizer replaces
    engine = LocalEngine(glm5, pad_token_id=PAD, precision="int8")
    outs = engine.generate(PROMPTS, SamplingParams(max_new_tokens=12, seed=5, n=2))
    assert [len(c.token_ids) for c in outs] == [12] * 6
    fp32 = LocalEngine(glm5, pad_token_id=PAD).generate(PROMPTS, SamplingParams(12, seed=5, n=2))
    for q, f in zip(outs, fp32):  # the same policy up to int8 rounding (the same seeds)
        same = [a == b for a, b in zip(q.token_ids, f.token_ids)]
        n = same.index(False) if False in same else len(same)  # tokens before they part
        gap = torch.tensor(q.logprobs[:n]) - torch.tensor(f.logprobs[:n])
        assert n > 0 and gap.abs().max() < 0.05


def test_replay_brings_trainer_logprobs_closer_to_an_int8_rollout():
    # the glm5-tiny preset (3 MoE layers): int8 activations route some tokens elsewhere than
    # the fp32 trainer, and replaying the rollout's experts brings logp_old nearer logp_infer
    cfg = build_config("glm5-tiny", vocab_size=V, max_position_embeddings=64, pad_token_id=PAD)
    model = init_model(cfg, seed=0).eval()
    engine = LocalEngine(model, pad_token_id=PAD, precision="int8", record_routing=True)
    outs = engine.generate(PROMPTS, SamplingParams(max_new_tokens=16, seed=5, n=4))
    prompts = [p for p in PROMPTS for _ in range(4)]
    differ = 0
    for p, c in zip(prompts, outs):
        with torch.no_grad(), record_routing(model) as rec:
            model(input_ids=torch.tensor([p + c.token_ids[:-1]]))
        differ += sum(int((r != t[0]).any(-1).sum()) for r, t in zip(c.routing, rec.experts))
    assert differ > 0
    batch = pad_trajectories(
        [trajectory_from_completion(p, c, 0) for p, c in zip(prompts, outs)], 0
    )
    batch.advantages = torch.ones(len(batch))
    gaps = []
    for routing in (None, [c.routing for c in outs]):
        policy_backward(model, batch, rl_cfg(), routing=routing)
        gaps.append(float(((batch.logp_old - batch.logp_infer).abs() * batch.mask).sum()))
    plain, replayed = gaps
    assert replayed < 0.9 * plain, gaps


def test_policy_forward_replays_the_recorded_experts(glm5):
    engine = LocalEngine(glm5, pad_token_id=PAD, record_routing=True)
    outs = engine.generate(PROMPTS, SamplingParams(max_new_tokens=8, seed=1, n=2))
    prompts = [p for p in PROMPTS for _ in range(2)]
    batch = pad_trajectories(
        [trajectory_from_completion(p, c, 0) for p, c in zip(prompts, outs)], 0
    )
    batch.advantages = torch.tensor([1.0, -1.0] * 3)
    routing = [c.routing for c in outs]
    n_experts = routers(glm5)[0].num_experts
    other = [[(e + 1) % n_experts for e in row] for row in routing]  # every token: other experts
    cfg = rl_cfg(micro_batch=4)  # two forwards of 4 and 2 rows
    experts = glm5.model.layers[1].mlp.experts  # the MoE layer's experts, given the top-k ids
    logp_old, grads, seen, ids = [], [], [], []
    spy = experts.register_forward_pre_hook(lambda _m, args: ids.append(args[1].clone()))
    try:
        for replay in (None, routing, other):
            glm5.zero_grad(set_to_none=True)
            policy_backward(glm5, batch, cfg, routing=replay)
            logp_old.append(batch.logp_old.clone())
            grads.append(glm5.lm_head.weight.grad.clone())
            seen.append(ids[:])
            ids.clear()
    finally:
        spy.remove()
        glm5.zero_grad(set_to_none=True)
    # the rollout routing is the trainer's own here (fp32): replaying it changes no trained
    # token's logprob (padding positions get placeholder experts)
    trained = batch.mask > 0
    torch.testing.assert_close(logp_old[1][trained], logp_old[0][trained], atol=1e-6, rtol=0)
    # the experts compute with the corrupted record: in logp_old's 2 forwards (full width)
    # and the loss's 2 micro-batches (trimmed to their last trained column)
    assert len(seen[2]) == 4 and seen[2][0].shape[0] == 4 * batch.input_ids.shape[1]
    for call, rows in zip(seen[2], (range(4), range(4, 6), range(4), range(4, 6))):
        call = call.view(len(rows), -1, 2)  # (rows, columns, k)
        for j, b in enumerate(rows):
            n = min(routing[b][0].shape[0], call.shape[1])
            assert torch.equal(call[j, :n], other[b][0][:n])
    assert (logp_old[2] - logp_old[0])[trained].abs().max() > 1e-3
    assert (grads[2] - grads[0]).abs().max() > 1e-6


def test_rl_step_with_routing_replay_and_its_checks(glm5, tmp_path):
    cfg = rl_cfg()
    engine = LocalEngine(glm5, pad_token_id=PAD, record_routing=True)
    stream = PromptStream([RLPrompt(p) for p in PROMPTS], seed=0)
    ro = collect_rollouts(engine, stream, 0, share_of_even_tokens, cfg, 0, list(STOPS), PAD)
    assert ro.batch is not None and len(ro.routing) == len(ro.batch)
    trained = [b for b in range(len(ro.batch)) if ro.batch.mask[b].any()]  # not overlong
    assert trained
    for b in trained:  # each row's routing covers its inputs up to the last trained one
        n_inputs = int((ro.batch.mask[b] > 0).nonzero().max()) + 1
        assert ro.routing[b][0].shape == (n_inputs, 2)

    # one RL step per engine from the same weights and seeds (the same completions): with the
    # true record the replayed logp_old is the rollout's (rho = 1); with a shifted record
    # train_rl's forwards take the other experts and rho moves off 1
    prompts = [RLPrompt(p) for p in PROMPTS]
    rho = []
    for kind in (LocalEngine, ShiftedRouting):
        policy = init_model(glm5_two_layers(V), seed=0)
        engine = kind(policy, pad_token_id=PAD, record_routing=True)
        out = tmp_path / kind.__name__
        rows = train_rl(
            policy, engine, prompts, share_of_even_tokens, cfg, out, pad_id=PAD, stop_ids=[*STOPS]
        )
        assert rows[0]["trained_tokens"] > 0 and rows[0]["engine_version"] == 1
        rho.append(rows[0]["rho_mean"])
    assert rho[0] == pytest.approx(1.0, abs=1e-5) and abs(rho[1] - 1.0) > 1e-3, rho
    after_sync = engine.generate(PROMPTS[:1], SamplingParams(max_new_tokens=2))
    assert after_sync[0].routing is not None  # the reloaded weights keep recording

    plain = LocalEngine(policy, pad_token_id=PAD)
    with pytest.raises(ValueError, match="routing_replay needs the LocalEngine recording"):
        train_rl(
            policy,
            plain,
            prompts,
            share_of_even_tokens,
            cfg,
            tmp_path / "b",
            pad_id=PAD,
            stop_ids=list(STOPS),
        )
    with pytest.raises(ValueError, match="routing_replay needs a model with MoE routers.*llama"):
        LocalEngine(small_llama(), pad_token_id=PAD, record_routing=True)
    with pytest.raises(ValueError, match="routing_replay.*speculative decoding"):
        LocalEngine(glm5, pad_token_id=PAD, record_routing=True, mtp=torch.nn.Identity())
    with pytest.raises(ConfigError, match="routing_replay.*engine.kind vllm"):
        make_engine(EngineCfg(kind="vllm"), glm5, pad_token_id=PAD, routing_replay=True)
    with pytest.raises(ValidationError, match="routing_replay.*engine.kind sglang"):
        rl_cfg(engine={"kind": "sglang"})


def lm_run(model, out_dir, gamma: float = 0.0):
    """Three logged LM steps on random tokens with a held-out forward after each; returns
    the metric rows and the load_stats of each step's recorded training forward."""
    batches = torch.randint(1, V, (3, 4, 17), generator=torch.Generator().manual_seed(0))
    expected = []

    def loss_fn(model, batch):
        with record_routing(model) as rec:
            loss = model(input_ids=batch[:, :-1], labels=batch[:, 1:]).loss
        counts = torch.bincount(rec.experts[0][0].reshape(-1), minlength=8)[None]  # (1, E)
        expected.append(load_stats(counts))
        return loss, batch[:, 1:].numel()

    def heldout(model):
        model.eval()
        with torch.no_grad():
            return float(model(input_ids=batches[0, :, :-1], labels=batches[0, :, 1:]).loss)

    optim = OptimCfg(lr=1e-3, warmup_steps=0, moe_bias_gamma=gamma)
    train_loop(
        model,
        [Phase(3, lambda i: batches[i])],
        loss_fn,
        optim,
        out_dir,
        log_every=1,
        heldout_fn=heldout,
        heldout_every=1,
    )
    return [r for r in read_rows(out_dir / "metrics.jsonl") if "loss" in r], expected


def test_lm_loop_logs_expert_load_without_the_balancer_and_the_report_shows_it(tmp_path):
    model = init_model(glm5_two_layers(V), seed=0)
    rows, expected = lm_run(model, tmp_path / "pretrain")
    assert len(rows) == 3
    for row, stats in zip(rows, expected):  # the step's training forward only, not held-out
        assert {k: row[k] for k in stats} == pytest.approx(stats)
        assert row["moe_imbalance_max"] >= 1.0 and "moe_imbalance_l0" in row
    assert torch.equal(routers(model)[0].e_score_correction_bias, torch.zeros(8))  # no balancer
    balanced, expected = lm_run(init_model(glm5_two_layers(V), seed=0), tmp_path / "bal", 0.01)
    assert [r["moe_imbalance_max"] for r in balanced] == pytest.approx(
        [s["moe_imbalance_max"] for s in expected]
    )

    stages = [{"name": "pretrain", "kind": "pretrain"}, {"name": "sft", "kind": "sft"}]
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"name": "t", "stages": stages}))
    for s in stages:
        (tmp_path / s["name"]).mkdir(exist_ok=True)
        (tmp_path / s["name"] / "DONE").write_text(json.dumps({"stage": s["name"]}))
    (tmp_path / "sft" / "metrics.jsonl").write_text(json.dumps({"step": 1, "loss": 1.0}) + "\n")
    md = write_report(tmp_path).read_text()
    first, last = rows[0], rows[-1]
    line = next(ln for ln in md.splitlines() if ln.startswith("| pretrain | 1 → 3 |"))
    assert f"{first['moe_imbalance_max']:.2f} → {last['moe_imbalance_max']:.2f}" in line
    assert f"{first['moe_imbalance_mean']:.2f} → {last['moe_imbalance_mean']:.2f}" in line
    section = md.split("## MoE expert load")[1].split("\n## ")[0]
    assert "| pretrain |" in section and "| sft |" not in section
    (tmp_path / "pretrain" / "metrics.jsonl").unlink()  # no MoE metrics left: no MoE table
    assert "MoE expert load" not in write_report(tmp_path).read_text()
