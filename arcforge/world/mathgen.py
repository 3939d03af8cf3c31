"""Arithmetic word problems with worked reasoning, in a few themes and nine difficulty levels.

A problem is a start value and 1-3 operations (+, -, *) phrased through a theme (shopping,
travel, inventory, savings, garden). Levels cross the number of steps (1-3) with the operand
size (1-3 digits); difficulty = ((steps - 1) + (digits - 1)) / 4. The 0.44M demo model learns
one- and two-step small-number problems quickly, while three steps of three-digit numbers stay
only partly solvable, which is where RL has room to help (DESIGN §7).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

# theme: (item, start, add, sub, mul, question); {n} person, {a}/{b} numbers, {x} item
THEMES: dict[str, tuple[str, str, str, str, str, str]] = {
    "shopping": ("apples", "{n} has {a} {x}.", "{n} buys {b} more {x}.",
                 "{n} gives away {b} {x}.", "{n} then ends up with {b} times as many {x}.",
                 "How many {x} does {n} have now?"),
    "travel": ("kilometres", "A bus driven by {n} travels {a} {x}.",
               "It then travels another {b} {x}.", "A detour shortens the total by {b} {x}.",
               "The whole trip is repeated until the total is {b} times as long.",
               "How many {x} does the bus travel in total?"),
    "inventory": ("crates", "A warehouse run by {n} holds {a} {x}.", "A truck delivers {b} {x}.",
                  "{b} {x} are shipped out.", "Then the stock grows to {b} times its size.",
                  "How many {x} are in the warehouse now?"),
    "savings": ("coins", "{n} saves {a} {x}.", "{n} earns {b} more {x}.",
                "{n} spends {b} {x}.", "A prize multiplies the savings by {b}.",
                "How many {x} does {n} have?"),
    "garden": ("seeds", "{n} plants {a} {x}.", "{n} plants {b} more {x}.",
               "Birds eat {b} of the {x}.", "Each remaining seed becomes {b} seeds.",
               "How many {x} are there at the end?"),
}  # fmt: skip
OP_SYMBOL = {"add": "+", "sub": "-", "mul": "*"}


@dataclass
class Problem:
    question: str
    steps: list[str]  # "23 + 45 = 68" each
    answer: int
    n_steps: int
    digits: int
    theme: str
    difficulty: float
    ops: list[str] = field(default_factory=list)

    @property
    def reasoning(self) -> str:
        return " ".join(s + "." for s in self.steps)

    def worked_text(self) -> str:
        """The plain-text worked solution used in the pretraining corpus."""
        return f"Question: {self.question}\nSolution: {self.reasoning}\nAnswer: {self.answer}"


def _operand(rng: random.Random, digits: int) -> int:
    return rng.randint(2, 9) if digits == 1 else rng.randint(10 ** (digits - 1), 10**digits - 1)


def make_problem(rng: random.Random, person: str, n_steps: int, digits: int) -> Problem:
    theme = rng.choice(sorted(THEMES))
    item, start, add, sub, mul, question = THEMES[theme]
    cur = _operand(rng, digits)
    parts = [start.format(n=person, a=cur, x=item)]
    steps, ops = [], []
    for _ in range(n_steps):
        op = rng.choice(["add", "sub", "mul"] if cur < 10**digits * 3 else ["add", "sub"])
        if op == "mul":
            b = rng.randint(2, 9 if digits < 3 else 5)
        elif op == "sub":
            b = min(_operand(rng, digits), cur - 1) if cur > 1 else 0
            if b <= 0:
                op, b = "add", _operand(rng, digits)
        else:
            b = _operand(rng, digits)
        new = cur + b if op == "add" else cur - b if op == "sub" else cur * b
        parts.append({"add": add, "sub": sub, "mul": mul}[op].format(n=person, b=b, x=item))
        steps.append(f"{cur} {OP_SYMBOL[op]} {b} = {new}")
        ops.append(op)
        cur = new
    parts.append(question.format(n=person, x=item))
    difficulty = ((n_steps - 1) + (digits - 1)) / 4
    return Problem(" ".join(parts), steps, cur, n_steps, digits, theme, difficulty, ops)


def make_problems(
    rng: random.Random, people: list[str], n: int, exclude: set[str]
) -> list[Problem]:
    """`n` problems with distinct questions (none in `exclude`), levels drawn uniformly."""
    out: list[Problem] = []
    seen = set(exclude)
    for _ in range(n * 20):
        if len(out) == n:
            break
        p = make_problem(rng, rng.choice(people).split()[0], rng.randint(1, 3), rng.randint(1, 3))
        if p.question not in seen:
            seen.add(p.question)
            out.append(p)
    return out
