"""Rejection sampling for reasoning SFT: sample k, keep the verified, filter by difficulty.

For each problem, a checkpoint samples k replies (thinking on); each is verified by the reward
registry (math-verify for math, unit tests for code, ...). A problem's pass rate is the share of
its k samples that scored 1. Problems outside the pass-rate band are dropped: too easy (the model
already solves them, nothing to learn) or unsolved / too hard (nothing verified to learn from).
Each kept problem exports up to `keep_per_problem` distinct verified replies as SFT
conversations, `{"messages": [user, assistant(reasoning, content)]}` per JSONL line, the shape
`jsonl:` sources and the SFT stage read back. This is the reasoning-SFT data path of GLM-5.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from arcforge.chat.formats import chat_format
from arcforge.data.sources import record_from_task
from arcforge.model.checkpoint import load_model
from arcforge.model.tokenizer import load_tokenizer
from arcforge.rollout.engines.base import SamplingParams
from arcforge.rollout.engines.local import LocalEngine
from arcforge.rollout.prompts import prompt_from_record, stop_token_ids, text_scorer
from arcforge.types import Message, Task


@dataclass
class RejectionResult:
    """Counts of one rejection-sampling run and where its JSONL went."""

    path: Path
    counts: dict[str, int] = field(default_factory=dict)
    pass_rates: dict[str, float] = field(default_factory=dict)  # task id -> pass rate


def rejection_sample(
    checkpoint: str | Path,
    tasks: list[Task],
    k: int,
    out_path: str | Path,
    band: tuple[float, float] = (0.1, 0.9),
    keep_per_problem: int = 1,
    temperature: float = 1.0,
    max_new_tokens: int = 96,
    seed: int = 0,
    precision: str = "fp32",
) -> RejectionResult:
    """Sample k replies per task from `checkpoint`, keep verified ones inside the band.

    Args:
        tasks: problems with a verifier (the registry picks it by kind / metadata scorer).
        k: samples per problem.
        out_path: the SFT JSONL to write.
        band: keep a problem when lo <= pass rate <= hi (and at least one reply verified).
        keep_per_problem: at most this many distinct verified replies per kept problem.
    Returns:
        RejectionResult with counts: problems, samples, verified, too_easy, too_hard, kept,
        examples (lines written).
    """
    lo, hi = band
    if not 0.0 <= lo <= hi <= 1.0:
        raise ValueError(f"band must satisfy 0 <= lo <= hi <= 1, got {band}")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    tok, _ = load_tokenizer(checkpoint)
    engine = LocalEngine(
        load_model(checkpoint).eval(), pad_token_id=tok.pad_token_id or 0, precision=precision
    )
    prompts = [prompt_from_record(record_from_task(t, t.id), tok) for t in tasks]
    params = SamplingParams(
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        n=k,
        stop_token_ids=tuple(stop_token_ids(tok)),
        seed=seed,
    )
    comps = engine.generate([p.ids for p in prompts], params)  # task-major, k adjacent
    rewards = text_scorer(tok)([p for p in prompts for _ in range(k)], comps)
    counts = dict.fromkeys(
        ("problems", "samples", "verified", "too_easy", "too_hard", "kept", "examples"), 0
    )
    counts.update(problems=len(tasks), samples=len(comps))
    rates, lines = {}, []
    for i, task in enumerate(tasks):
        group = range(i * k, (i + 1) * k)
        ok = [j for j in group if rewards[j].score >= 1.0]
        rate = len(ok) / k
        rates[task.id] = rate
        counts["verified"] += len(ok)
        if rate > hi:
            counts["too_easy"] += 1
            continue
        if rate < lo or not ok:
            counts["too_hard"] += 1
            continue
        counts["kept"] += 1
        seen: set[str] = set()
        for j in ok:
            parsed = chat_format(tok).parse_ids(list(comps[j].token_ids))
            key = f"{parsed.reasoning}\x00{parsed.content}"
            if key in seen or len(seen) >= keep_per_problem:
                continue
            seen.add(key)
            msgs = [
                Message(role="user", content=task.instruction),
                Message(role="assistant", content=parsed.content, reasoning=parsed.reasoning),
            ]
            lines.append(
                json.dumps(
                    {"messages": [m.to_dict() for m in msgs], "task_id": task.id, "pass_rate": rate}
                )
            )
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(line + "\n" for line in lines))
    counts["examples"] = len(lines)
    return RejectionResult(out, counts, rates)
