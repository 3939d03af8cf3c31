"""Verifiable reward for math answers: 1.0 when the final answer equals the reference.

The final answer is taken from the last `Answer: ...` line (our template's convention), else
from the last `\\boxed{...}`, else the whole response; equality is decided by math-verify
(integers, decimals, fractions, LaTeX), with exact string match as a fallback when math-verify
cannot parse either side.
"""

from __future__ import annotations

import re

from math_verify import parse, verify

_ANSWER = re.compile(r"Answer:\s*(.+)", re.IGNORECASE)
_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")


def extract_answer(text: str) -> str:
    """The final-answer string of a response ('' when the response is empty)."""
    m = _ANSWER.findall(text)
    if m:
        return m[-1].strip().rstrip(".").strip()
    b = _BOXED.findall(text)
    if b:
        return b[-1].strip()
    return text.strip()


def normalize(s: str) -> str:
    return re.sub(r"\s+", " ", s.strip().lower().rstrip("."))


def math_reward(response: str, reference: str) -> float:
    """1.0 if the response's final answer matches `reference`, else 0.0."""
    pred = extract_answer(response)
    if not pred:
        return 0.0
    if normalize(pred) == normalize(reference):
        return 1.0
    try:
        gold_p, pred_p = parse(f"${reference}$"), parse(f"${pred}$")
        if gold_p and pred_p:
            return 1.0 if verify(gold_p, pred_p) else 0.0
    except Exception:  # math-verify raises on odd input; that is a wrong answer, not a crash
        return 0.0
    return 0.0


def exact_match(response: str, reference: str) -> float:
    """Normalized exact match of the final answer."""
    return 1.0 if normalize(extract_answer(response)) == normalize(reference) else 0.0
