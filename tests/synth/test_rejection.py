"""Rejection sampling keeps verified replies of problems inside the pass-rate band.

A nano model is fine-tuned in seconds on three questions: "easy" always answered 7 (its
reference), "mid" answered 3 or 4 half the time each (reference 3), "hard" never with its
reference. Sampled at T=1, the pass rates land near 1, 1/2 and 0: only "mid" survives the band.
"""

from __future__ import annotations

import json

import torch

from arcforge.data.sources import load_records
from arcforge.model.checkpoint import init_model, save_checkpoint
from arcforge.model.presets import build_config
from arcforge.model.tokenizer import train_tokenizer
from arcforge.synth.rejection import rejection_sample
from arcforge.train.sft import Conversation, encode_conversations, make_batch_fn, sft_loss
from arcforge.types import Message, Task, Validation

QUESTIONS = {
    "easy": ("How many apples?", ["7"], "7"),
    "mid": ("How many pears?", ["3", "4"], "3"),
    "hard": ("How many plums?", ["5"], "6"),
}


def _checkpoint(tmp_path):
    convs = [
        Conversation([Message("user", q), Message("assistant", f"Answer: {a}", reasoning="ok")])
        for q, answers, _ in QUESTIONS.values()
        for a in answers
        for _ in range(6 // len(answers))
    ]
    tok = train_tokenizer([m.content for c in convs for m in c.messages] * 20, vocab_size=320)
    examples, _ = encode_conversations(convs, tok, max_len=64)
    conf = build_config(
        "nano",
        vocab_size=len(tok),
        max_position_embeddings=128,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
    )
    model = init_model(conf, seed=0)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    batch = make_batch_fn(examples, len(examples), 0, tok.pad_token_id)
    for step in range(150):
        loss, _ = sft_loss(model, batch(step))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return save_checkpoint(model, tok, tmp_path / "ckpt")


def test_band_keeps_only_partly_solved_problems(tmp_path):
    ckpt = _checkpoint(tmp_path)
    tasks = [
        Task(name, "math", q, validation=Validation(answer=ref))
        for name, (q, _, ref) in QUESTIONS.items()
    ]
    res = rejection_sample(
        ckpt,
        tasks,
        k=16,
        out_path=tmp_path / "sft.jsonl",
        band=(0.2, 0.8),
        keep_per_problem=2,
        max_new_tokens=24,
    )
    r = res.pass_rates
    assert r["easy"] > 0.8 and 0.2 <= r["mid"] <= 0.8 and r["hard"] == 0.0, r
    c = res.counts
    assert (c["problems"], c["samples"], c["too_easy"], c["too_hard"], c["kept"]) == (
        3,
        48,
        1,
        1,
        1,
    )
    lines = [json.loads(x) for x in res.path.read_text().splitlines()]
    assert len(lines) == c["examples"] == 1  # the verified "mid" replies are all identical
    assert lines[0]["task_id"] == "mid"
    recs = load_records(f"jsonl:{res.path}", on_error="fatal")  # the SFT stage can read it back
    user, reply = recs[0].messages
    assert user.content == "How many pears?" and reply.content == "Answer: 3"
    assert reply.reasoning == "ok"
