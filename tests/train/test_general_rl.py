"""General RL: anchors enter their groups as exact template token sequences with the policy's
logprobs, and a short general_rl stage (ORM trained in-stage, a replay LLM judge over real
HTTP, anchors on) runs through the pipeline, changes the weights and logs a finite loss."""

import json
import math

import pytest
import torch

from arcforge.chat import parse_assistant, render_ids
from arcforge.chat.tokens import END
from arcforge.model.checkpoint import init_model, load_model
from arcforge.model.presets import build_config
from arcforge.model.tokenizer import train_tokenizer
from arcforge.pipeline import RunContext, run_stage
from arcforge.replay import ReplayServer
from arcforge.rewards.anchors import anchor_tasks
from arcforge.rl.losses import token_logprobs
from arcforge.rollout.engines.base import SamplingParams
from arcforge.rollout.engines.local import LocalEngine
from arcforge.run_config import parse_config
from arcforge.stages.common import model_for_stage
from arcforge.train.general_rl import (
    AnchorEngine,
    anchor_prompts,
    anchor_reply_ids,
    mix_anchors,
)
from arcforge.types import Message
from arcforge.world.tasks.constrained_chat import check_constraints


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Tiny models gain nothing from 2 threads, and on a shared 2-core machine OpenMP's
    spin-waiting threads slow them down by an order of magnitude."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def test_anchor_answers_meet_their_own_constraints():
    tasks = anchor_tasks()
    assert len(tasks) >= 12
    assert {t.metadata["category"] for t in tasks} >= {"empathy", "translation", "roleplay", "qa"}
    for t in tasks:
        frac, per = check_constraints(t.metadata["anchor"], t.validation.constraints)
        assert frac == 1.0, (t.id, per)


@pytest.mark.parametrize("thinking", [True, False])
def test_anchor_engine_injects_the_human_reply(thinking):
    tok = train_tokenizer(
        ["I missed the train, but the next one comes in ten minutes."] * 30, vocab_size=300
    )
    conf = build_config(
        "nano", vocab_size=len(tok), max_position_embeddings=256, pad_token_id=tok.pad_token_id
    )
    policy = init_model(conf, seed=1)
    anchors = anchor_prompts(tok, anchor_tasks()[:2], thinking)
    reply = anchor_reply_ids(tok, anchors[0].task.metadata["anchor"], thinking)
    # the reply ids are what the template renders for that assistant message
    msgs = [
        Message("user", anchors[0].task.instruction, thinking=thinking),
        Message("assistant", anchors[0].task.metadata["anchor"], reasoning=""),
    ]
    assert (
        render_ids(msgs, tok).input_ids
        == anchors[0].ids + reply + render_ids([Message("user", "x")], tok).input_ids[-1:]
    )  # the trailing newline
    assert (
        parse_assistant(tok.decode(reply, skip_special_tokens=False)).content
        == (anchors[0].task.metadata["anchor"])
    )
    eng = AnchorEngine(
        LocalEngine(policy, pad_token_id=tok.pad_token_id), policy, {tuple(anchors[0].ids): reply}
    )
    other = render_ids([Message("user", "hello")], tok, add_generation_prompt=True).input_ids
    p = SamplingParams(max_new_tokens=len(reply) + 5, temperature=1.0, n=3, seed=5)
    comps = eng.generate([anchors[0].ids, other], p)
    assert eng.injected == 1 and len(comps) == 6
    assert comps[2].token_ids == reply and comps[2].finish_reason == "stop"
    assert [c.token_ids for c in comps[:2]] != [reply, reply]  # the other samples are sampled
    ids = torch.tensor([anchors[0].ids + reply])
    want = token_logprobs(policy(input_ids=ids[:, :-1]).logits, ids[:, 1:])[0, -len(reply) :]
    torch.testing.assert_close(torch.tensor(comps[2].logprobs), want, atol=1e-5, rtol=0)
    # the other prompt's group is untouched
    plain = LocalEngine(policy, pad_token_id=tok.pad_token_id).generate([anchors[0].ids, other], p)
    assert [c.token_ids for c in comps[3:]] == [c.token_ids for c in plain[3:]]
    assert len(mix_anchors(list(range(90)), anchors, 0.1)) == 100  # 10 of 100 are anchors


def judge(messages):
    """A noisy judge: a score from the reply's text length, wrapped in prose."""
    reply = messages[-1]["content"]
    return f"The reply is odd.\nScore: {1 + len(reply) % 10}"


def test_general_rl_stage_changes_weights_with_finite_loss(tmp_path):
    with ReplayServer(judge) as srv:
        cfg = parse_config(
            {
                "name": "grl",
                "world": {"seed": 5, "scale": 0.1},
                "tokenizer": {"vocab_size": 512, "train_chars": 150000},
                "model": {"preset": "nano", "max_position_embeddings": 512},
                "stages": [
                    {
                        "name": "general",
                        "kind": "general_rl",
                        "steps": 2,
                        "prompts_per_step": 2,
                        "group_size": 4,
                        "max_new_tokens": 48,
                        "temperature": 1.0,
                        "micro_batch": 8,
                        "max_refill_tries": 1,
                        "checkpoint_every": 1,
                        "optim": {"lr": 1e-3, "warmup_steps": 0, "min_lr_ratio": 1.0},
                        "reward": {"gates": ["format"], "w_orm": 1.0, "w_grm": 1.0},
                        "orm": {
                            "train": {"steps": 2, "batch_size": 4, "max_len": 128, "heldout": None}
                        },
                        "grm": {
                            "base_url": srv.base_url,
                            "model": "judge",
                            "api_key_env": None,
                            "k": 2,
                            "workers": 2,
                        },
                        "anchors": {"weight": 0.9},
                    }
                ],
            }
        )
        ctx = RunContext(cfg, tmp_path)
        stage = cfg.stages[0]
        before = model_for_stage(ctx, stage).state_dict()
        summary = run_stage(ctx, stage)
        judged = len(srv.requests)
    out = tmp_path / "general"
    after = load_model(out / "checkpoint").state_dict()
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    assert changed, "no parameter changed"
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in rows if "loss" in r]
    assert len(rows) == 2 and losses and all(math.isfinite(v) for v in losses)
    # an untrained policy never stops within 48 tokens (its samples are overlong and masked);
    # the human anchors are complete replies, so they are what this run trains on
    assert sum(r["trained_tokens"] for r in rows) > 0
    assert (out / "orm" / "DONE").exists() and (out / "orm" / "head.safetensors").exists()
    logged = [json.loads(x) for x in (out / "reward.jsonl").read_text().splitlines()]
    assert logged and all("reward_mean" in r for r in logged)
    assert summary["anchors_injected"] > 0 and summary["anchor_prompts"] == len(anchor_tasks())
    assert judged > 0 and 0.0 <= summary["gated_frac"] <= 1.0


def test_tool_route_scores_tool_prompts_by_their_calls_and_chat_by_the_rules(world, tok):
    """A general-RL prompt whose task names tools offers them and is scored by the call's
    validity (1 for a schema-valid call, 0 for plain text or a bad argument); a chat prompt
    in the same batch keeps the hybrid rule reward, where a tool call fails the format gate."""
    from arcforge.data.sources import Record
    from arcforge.rewards.hybrid import HybridCfg, HybridReward
    from arcforge.rollout.engines.base import Completion
    from arcforge.rollout.prompts import prompt_from_record
    from arcforge.train.general_rl import hybrid_scorer

    tools = world.tools()
    tool_task = world.tasks("tool", "train")[0]
    chat_task = world.tasks("chat", "train")[0]
    tp = prompt_from_record(
        Record(prompt=tool_task.instruction, task=tool_task, origin="t"), tok, tools=tools
    )
    cp = prompt_from_record(
        Record(prompt=chat_task.instruction, task=chat_task, origin="c"), tok, tools=tools
    )
    assert '"lookup"' in tok.decode(tp.ids) and '"lookup"' not in tok.decode(cp.ids)
    assert (
        tp.ids
        != prompt_from_record(
            Record(prompt=tool_task.instruction, task=tool_task, origin="t"), tok
        ).ids
    )

    call = '<tool_call>{"name": "lookup", "arguments": {"entity": "A", "relation": "born_in"}}</tool_call>'
    bad = '<tool_call>{"name": "lookup", "arguments": {"entity": "A", "colour": "red"}}</tool_call>'
    replies = [(tp, call), (tp, bad), (tp, "It is 59."), (cp, call), (cp, "A plain reply.")]
    comps = [
        Completion(tok(r + END, add_special_tokens=False)["input_ids"], [], "stop")
        for _, r in replies
    ]
    hybrid = HybridReward(HybridCfg(gates=["format"], w_orm=0.0, w_grm=0.0))
    got = hybrid_scorer(tok, hybrid, tools=tools)([p for p, _ in replies], comps)
    assert [r.score for r in got[:3]] == [1.0, 0.0, 0.0]
    assert got[0].details["route"] == "tool_call" and "colour" in got[1].details["why"]
    assert got[3].score == 0.0 and got[3].details["gated"] == ["format"]  # a call in chat
    assert got[4].details["route"] != "tool_call" and "gated" not in got[4].details


def test_orm_head_init_depends_on_its_seed_only_and_leaves_the_global_rng_alone(tok):
    """The in-stage ORM's head came from the global RNG, so its start (and the general-RL and
    distilled checkpoints after it) hung on what the process had drawn before."""
    from arcforge.rewards.orm import RewardModel

    conf = build_config(
        "nano", vocab_size=len(tok), max_position_embeddings=64, pad_token_id=tok.pad_token_id
    )
    lm = init_model(conf, seed=0)
    torch.manual_seed(1)
    a = RewardModel(lm, tok, max_len=32, seed=3)
    torch.manual_seed(2)
    torch.rand(7)
    state = torch.get_rng_state()
    b = RewardModel(lm, tok, max_len=32, seed=3)
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.equal(a.head.weight, b.head.weight) and torch.equal(a.head.bias, b.head.bias)
    assert not torch.equal(a.head.weight, RewardModel(lm, tok, max_len=32, seed=4).head.weight)
    assert a.head.bias.item() == 0.0 and a.head.weight.shape == (1, conf.hidden_size)
    # N(0, 1/H): the mean square of H draws is about 1/H
    assert (
        0.5 / conf.hidden_size
        < a.head.weight.detach().pow(2).mean().item()
        < 2.0 / conf.hidden_size
    )


def test_a_resume_keeps_the_reward_rows_of_the_steps_it_does_not_redo(tmp_path):
    """State at step 2; step 1 refilled once (2 scorer calls), step 2 did not (1): 3 rows stay,
    the rows of step 3 (logged before the crash, redone by the resume) go; no state: none stay."""
    from arcforge.stages.general_rl import trim_reward_log

    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "trainer.json").write_text('{"step": 2}')
    metrics = [{"step": 1, "refills": 1}, {"step": 2, "refills": 0}, {"step": 3, "refills": 1}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in metrics))
    log = tmp_path / "reward.jsonl"
    log.write_text("".join(json.dumps({"call": i}) + "\n" for i in range(5)))
    trim_reward_log(tmp_path)
    assert [json.loads(x)["call"] for x in log.read_text().splitlines()] == [0, 1, 2]
    (tmp_path / "state" / "trainer.json").unlink()
    trim_reward_log(tmp_path)
    assert log.read_text() == ""
