"""The synchronous RL loop on a toy task a nano model learns in seconds.

Toy task: prompt [BOS, digit a, SEP]; the correct reply is [digit (3a + 1) mod 10, END]. A
short SFT on data where only 40% of replies are right leaves the policy partly solvable
(~35% correct), the regime where RL helps (DESIGN §7); everything above that is learned from
the 0/1 reward alone.
"""

from __future__ import annotations

import json

import torch
import torch.nn.functional as F

from arcforge.model.checkpoint import init_model
from arcforge.model.presets import build_config
from arcforge.rl.losses import POLICY_LOSSES
from arcforge.rollout.engine import LocalEngine, SamplingParams
from arcforge.stages.rl import RLStageCfg
from arcforge.train.rl import PromptStream, RLPrompt, collect_rollouts, train_rl
from arcforge.types import Reward, Task, Validation

PAD, BOS, END, SEP, D0, V = 0, 1, 2, 3, 10, 24


def answer(a: int) -> int:
    return D0 + (3 * a + 1) % 10


def toy_prompts() -> list[RLPrompt]:
    return [
        RLPrompt(
            [BOS, D0 + a, SEP],
            Task(f"t{a}", "math", str(a), validation=Validation(answer=str(answer(a)))),
        )
        for a in range(10)
    ]


def toy_scorer(prompts, comps):
    return [
        Reward(float(c.token_ids == [int(p.task.validation.answer), END]))
        for p, c in zip(prompts, comps)
    ]


def format_sft(seed: int = 0, steps: int = 40, p_correct: float = 0.0) -> torch.nn.Module:
    """A nano model that replies [digit, END]: the right digit with SFT data share
    `p_correct`, a random one otherwise (p_correct=0: format only)."""
    torch.manual_seed(seed)
    conf = build_config(
        "nano",
        vocab_size=V,
        max_position_embeddings=16,
        pad_token_id=PAD,
        bos_token_id=BOS,
        eos_token_id=END,
    )
    model = init_model(conf, seed=seed)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(steps):
        a, d = torch.randint(10, (64,)), torch.randint(10, (64,))
        d = torch.where(torch.rand(64) < p_correct, (3 * a + 1) % 10, d)
        x = torch.stack([torch.full_like(a, BOS), D0 + a, torch.full_like(a, SEP), D0 + d], 1)
        y = torch.stack([torch.full_like(a, -100)] * 2 + [D0 + d, torch.full_like(a, END)], 1)
        loss = F.cross_entropy(model(input_ids=x).logits.reshape(-1, V), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval()


def pass_rate(model, n: int = 16) -> float:
    eng = LocalEngine(model, pad_token_id=PAD)
    ps = toy_prompts()
    outs = eng.generate(
        [p.ids for p in ps],
        SamplingParams(max_new_tokens=3, temperature=1.0, stop_token_ids=(END,), seed=999, n=n),
    )
    return sum(r.score for r in toy_scorer([p for p in ps for _ in range(n)], outs)) / len(outs)


def cfg(**kw) -> RLStageCfg:
    base = dict(
        name="rl",
        kind="rl",
        sources=[{"source": "world:reasoning"}],
        steps=12,
        prompts_per_step=8,
        group_size=8,
        temperature=1.0,
        max_new_tokens=3,
        micro_batch=32,
        optim={"lr": 1e-3, "warmup_steps": 0, "min_lr_ratio": 1.0, "weight_decay": 0.0},
    )
    return RLStageCfg.model_validate({**base, **kw})


def test_prompt_stream_is_a_permutation_per_epoch():
    ps = toy_prompts()
    s = PromptStream(ps, seed=3)
    first = [p.task.id for p in s.take(0, 10)]
    assert sorted(first) == sorted(p.task.id for p in ps)  # every prompt once per epoch
    assert [p.task.id for p in s.take(4, 3)] == first[4:7]  # a pure function of the cursor
    assert [p.task.id for p in PromptStream(ps, seed=3).take(7, 6)][:3] == first[7:]


def test_collect_drops_uniform_groups_refills_and_masks_overlong():
    model = format_sft(steps=15)
    eng = LocalEngine(model, pad_token_id=PAD)
    dead = {"t0", "t1", "t2", "t3", "t4"}  # these prompts always score 0: no signal

    def scorer(prompts, comps):
        return [
            Reward(0.0 if p.task.id in dead else float(c.token_ids[0] % 2))
            for p, c in zip(prompts, comps)
        ]

    c = cfg(prompts_per_step=4, max_new_tokens=2, max_refill_tries=3)
    ro = collect_rollouts(eng, PromptStream(toy_prompts(), 0), 0, scorer, c, 0, [END], PAD)
    n = ro.counts
    # each refill draws only the missing groups as fresh prompts from the cursor
    kept = n["groups_sampled"] - n["dropped_uniform"]
    assert n["groups_sampled"] == ro.cursor and n["dropped_uniform"] >= 1 and n["refills"] >= 1
    assert kept == 4 or n["refills"] == 3
    assert len(ro.batch) == 8 * kept
    # max_new_tokens=2 with [digit, END] replies: anything else was cut and gets no loss
    overlong = (ro.batch.targets == END).sum(1) == 0  # (B,) rows that never stopped
    assert n["dropped_overlong"] == int(overlong.sum())
    assert (ro.batch.mask[overlong] == 0).all() and (ro.batch.mask[~overlong].sum(1) >= 1).all()
    # advantages are zero-mean per group (mean baseline)
    torch.testing.assert_close(
        ro.batch.advantages.view(-1, 8).sum(1), torch.zeros(len(ro.batch) // 8)
    )


def test_rl_raises_pass_rate_from_reward_alone(tmp_path):
    model = format_sft(steps=60, p_correct=0.4)
    before = pass_rate(model)
    eng = LocalEngine(model, pad_token_id=PAD)
    rows = train_rl(
        model, eng, toy_prompts(), toy_scorer, cfg(steps=25), tmp_path, pad_id=PAD, stop_ids=[END]
    )
    after = pass_rate(model)  # measured at T=1 on fresh seeds, with the trainer's weights
    assert before < 0.45 and after > before + 0.2, (before, after)
    assert eng.version == 25 and rows[-1]["engine_version"] == 25
    logged = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in logged] == list(range(1, 26))
    for key in (
        "reward_mean",
        "pass_rate",
        "popped_frac",
        "clip_frac",
        "dropped_uniform",
        "dropped_overlong",
        "tokens_per_s",
    ):
        assert key in logged[-1]


def test_rl_resume_repeats_no_prompt_and_matches_uninterrupted(tmp_path):
    c = cfg(steps=4, checkpoint_every=100)
    ref_model = format_sft(steps=15)
    model = format_sft(steps=15)
    ref_rows = train_rl(
        ref_model,
        LocalEngine(ref_model, pad_token_id=PAD),
        toy_prompts(),
        toy_scorer,
        c,
        tmp_path / "a",
        pad_id=PAD,
        stop_ids=[END],
    )
    train_rl(
        model,
        LocalEngine(model, pad_token_id=PAD),
        toy_prompts(),
        toy_scorer,
        c,
        tmp_path / "b",
        pad_id=PAD,
        stop_ids=[END],
        stop_after=2,
    )
    state = json.loads((tmp_path / "b" / "state" / "trainer.json").read_text())
    assert state["step"] == 2 and state["engine_version"] == 2 and state["cursor"] >= 16
    fresh = format_sft(steps=15)  # a new process would start from the init checkpoint
    eng = LocalEngine(fresh, pad_token_id=PAD)
    rows = train_rl(
        fresh, eng, toy_prompts(), toy_scorer, c, tmp_path / "b", pad_id=PAD, stop_ids=[END]
    )
    assert [r["step"] for r in rows] == [3, 4] and eng.version == 4
    for a, b in zip(ref_rows[2:], rows):
        assert a["reward_mean"] == b["reward_mean"] and a["groups_sampled"] == b["groups_sampled"]
    for (k, p), q in zip(ref_model.state_dict().items(), fresh.state_dict().values()):
        torch.testing.assert_close(p, q, msg=k)
    logged = [
        json.loads(x)["step"] for x in (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()
    ]
    assert logged == [1, 2, 3, 4]


def test_grpo_without_icepop_ignores_the_inference_logprobs():
    """icepop_beta None: no token is popped however far the engine's logprob is from the
    trainer's (ρ = e^3 = 20 here would leave IcePop's [1/2, 2] band), and the loss equals
    IcePop's with an unbounded band on a matched batch."""
    logp = torch.log(torch.tensor([[0.5, 0.25]])).requires_grad_()
    old, infer = logp.detach().clone(), logp.detach() - torch.tensor([[3.0, 0.0]])
    adv, mask = torch.tensor([1.0]), torch.ones(1, 2)
    off, st = POLICY_LOSSES["grpo_icepop"](logp, old, infer, adv, mask, 0.2, 0.28, None)
    on, st_on = POLICY_LOSSES["grpo_icepop"](logp, old, infer, adv, mask, 0.2, 0.28, 2.0)
    wide, _ = POLICY_LOSSES["grpo_icepop"](logp, old, old, adv, mask, 0.2, 0.28, float("inf"))
    assert st["popped_frac"] == 0.0 and st["rho_mean"] == 1.0 and st_on["popped_frac"] == 0.5
    torch.testing.assert_close(off, wide)  # ratio 1 everywhere: loss = -mean(A) = -1
    torch.testing.assert_close(off, torch.tensor(-1.0))
    assert on.item() == -0.5  # the popped token drops out: -(0 + 1) / 2
