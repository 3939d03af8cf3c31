"""Arithmetic word problems with worked reasoning, in a few themes and nine difficulty levels.

A problem is a start value and 1-3 operations (+, -, *) phrased through a theme (shopping,
travel, inventory, savings, garden). Levels cross the number of steps (1-3) with the operand
size (1-3 digits); difficulty = ((steps - 1) + (digits - 1)) / 4. A tiny model learns
one- and two-step small-number problems quickly, while three steps of three-digit numbers stay
only partly solvable, which is where RL has room to help.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

# theme: (item, start, add, sub, mul, question); {n} person, {a}/{b} numbers, {x} item
THEMES: dict[str, tuple[str, str, str, str, str, str]] = {
    "shopping": (
        "apples",
        "{n} has {a} {x}.",
        "{n} buys {b} more {x}.",
        "{n} gives away {b} {x}.",
        "{n} then ends up with {b} times as many {x}.",
        "How many {x} does {n} have now?",
    ),
    "travel": (
        "kilometres",
        "A bus driven by {n} travels {a} {x}.",
        "It then travels another {b} {x}.",
        "A detour shortens the total by {b} {x}.",
        "The whole trip is repeated until the total is {b} times as long.",
        "How many {x} does the bus travel in total?",
    ),
    "inventory": (
        "crates",
        "A warehouse run by {n} holds {a} {x}.",
        "A truck delivers {b} {x}.",
        "{b} {x} are shipped out.",
        "Then the stock grows to {b} times its size.",
        "How many {x} are in the warehouse now?",
    ),
    "savings": (
        "coins",
        "{n} saves {a} {x}.",
        "{n} earns {b} more {x}.",
        "{n} spends {b} {x}.",
        "A prize multiplies the savings by {b}.",
        "How many {x} does {n} have?",
    ),
    "garden": (
        "seeds",
        "{n} plants {a} {x}.",
        "{n} plants {b} more {x}.",
        "Birds eat {b} of the {x}.",
        "Each remaining seed becomes {b} seeds.",
        "How many {x} are there at the end?",
    ),
}
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
        """Worked steps; a multi-digit operation is first worked column by column."""
        return " ".join(column_work(s) + "." for s in self.steps)

    def worked_text(self) -> str:
        """The plain-text worked solution used in the pretraining corpus."""
        return f"Question: {self.question}\nSolution: {self.reasoning}\nAnswer: {self.answer}"


def _digits(n: int) -> list[int]:
    return [int(c) for c in reversed(str(n))]  # least significant first


def _add_columns(a: int, b: int) -> list[str]:
    da, db, carry, out = _digits(a), _digits(b), 0, []
    for i in range(max(len(da), len(db))):
        x, y = (da[i] if i < len(da) else 0), (db[i] if i < len(db) else 0)
        terms = [str(x), str(y)] + (["1"] if carry else [])
        total = x + y + carry
        out.append(f"{' + '.join(terms)} = {total}")
        carry = total // 10
    return out


def _sub_columns(a: int, b: int) -> list[str]:
    da, db, borrow, out = _digits(a), _digits(b), 0, []
    for i in range(len(da)):
        x, y = da[i] - borrow, (db[i] if i < len(db) else 0)
        borrow = 1 if x < y else 0
        out.append(f"{x + 10 * borrow} - {y} = {x + 10 * borrow - y}")
    return out


def _mul_columns(a: int, b: int) -> list[str]:
    out, carry = [], 0
    for x in _digits(a):
        total = x * b + carry
        out.append(f"{x} * {b}" + (f" + {carry}" if carry else "") + f" = {total}")
        carry = total // 10
    return out


def column_work(step: str) -> str:
    """'589 + 623 = 1212' -> '589 + 623: 9 + 3 = 12, 8 + 2 + 1 = 11, 5 + 6 + 1 = 12, so 589 + 623
    = 1212'.

    The operation is restated first, then worked in columns from the units digit up (carries
    and borrows written out), so a tiny model learns multi-digit arithmetic from one-digit facts
    instead of memorising whole sums. The restatement is a whole-number copy from the question
    (what attention learns first); each column then reads its digits from the restatement just
    written instead of searching the question for "the units digit of the second number"
    (docs/experiments.md, "Reasoning RL"). A step whose operands are both one digit stays as it
    is.
    """
    a_s, op, b_s, _, _ = step.split(" ")
    a, b = int(a_s), int(b_s)
    if a < 10 and b < 10:
        return step
    cols = {"+": _add_columns, "-": _sub_columns, "*": _mul_columns}[op](a, b)
    return f"{a_s} {op} {b_s}: " + ", ".join(cols) + f", so {step}"


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


def tir_program(steps: list[str]) -> tuple[str, str]:
    """The plan and the Python program that compute worked steps ("a op b = c" each):
    ("Start from a, then op b, ...", "x = a\\nx = x op b\\n...print(x)\\n"). The TIR expert's
    script and the mid-training how-to documents both write it this way."""
    if not steps:
        raise ValueError("a TIR program needs at least one worked step")
    parts = [s.split(" ") for s in steps]
    start = parts[0][0]
    lines = [f"x = {start}"] + [f"x = x {p[1]} {p[2]}" for p in parts]
    plan = f"Start from {start}, then " + ", then ".join(f"{p[1]} {p[2]}" for p in parts)
    return plan, "\n".join(lines + ["print(x)"]) + "\n"
