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
from rl_helpers import DigitTask, digit_rl_cfg
from tiny_models import toy_token_nano

from arcforge.rl.losses import POLICY_LOSSES
from arcforge.rollout.engines.local import LocalEngine
from arcforge.train.rl import PromptStream, collect_rollouts, train_rl
from arcforge.types import Reward

PAD, BOS, END, SEP, D0, V = 0, 1, 2, 3, 10, 24
TASK = DigitTask(bos=BOS, sep=SEP, end=END, digit0=D0)


def format_sft(seed: int = 0, steps: int = 40, p_correct: float = 0.0) -> torch.nn.Module:
    """A nano model that replies [digit, END]: the right digit with SFT data share
    `p_correct`, a random one otherwise (p_correct=0: format only)."""
    torch.manual_seed(seed)
    model = toy_token_nano(V, pad=PAD, bos=BOS, eos=END, seed=seed)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(steps):
        x, y = TASK.sft_batch(p_correct)
        loss = F.cross_entropy(model(input_ids=x).logits.reshape(-1, V), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval()


def pass_rate(model) -> float:
    return TASK.pass_rate(LocalEngine(model, pad_token_id=PAD))


def train_toy(model, c, out, **kw) -> tuple[list[dict], LocalEngine]:
    """train_rl of `model` on the toy task with `c`, writing to `out`: (rows, its engine)."""
    engine = LocalEngine(model, pad_token_id=PAD)
    rows = train_rl(
        model, engine, TASK.prompts(), TASK.score, c, out, pad_id=PAD, stop_ids=[END], **kw
    )
    return rows, engine


def test_prompt_stream_is_a_permutation_per_epoch():
    ps = TASK.prompts()
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

    c = digit_rl_cfg(prompts_per_step=4, max_new_tokens=2, max_refill_tries=3)
    ro = collect_rollouts(eng, PromptStream(TASK.prompts(), 0), 0, scorer, c, 0, [END], PAD)
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
    rows, eng = train_toy(model, digit_rl_cfg(steps=25), tmp_path)
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
    c = digit_rl_cfg(steps=4, checkpoint_every=100)
    ref_model = format_sft(steps=15)
    model = format_sft(steps=15)
    ref_rows, _ = train_toy(ref_model, c, tmp_path / "a")
    train_toy(model, c, tmp_path / "b", stop_after=2)
    state = json.loads((tmp_path / "b" / "state" / "trainer.json").read_text())
    assert state["step"] == 2 and state["engine_version"] == 2 and state["cursor"] >= 16
    fresh = format_sft(steps=15)  # a new process would start from the init checkpoint
    rows, eng = train_toy(fresh, c, tmp_path / "b")
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
