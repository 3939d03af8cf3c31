"""The world's tools: knowledge-base lookup, a safe calculator, title search and page opening.

Tools answer from the same knowledge base and pages the corpus was rendered from, so a model
that calls them gets ground truth. Failures come back as strings starting with "error:" that
name the problem (unknown entity, unknown relation, bad expression): tool errors are
observations for the model, never exceptions. Like a real API's "did you mean", an unknown
entity comes back with the closest known names (difflib's ratio, the standard library's fuzzy
match), and an unknown relation with the entity's relations, so a wrong call can be repaired
from the observation alone.
"""

from __future__ import annotations

import ast
import difflib
import operator
import re

from arcforge.types import Tool
from arcforge.world.knowledge.kb import KB
from arcforge.world.knowledge.pages import Page

_BINOPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNOPS = {ast.USub: operator.neg, ast.UAdd: operator.pos}


def _eval(node: ast.AST) -> float | int:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and (abs(right) > 64 or abs(left) > 10**6):
            raise ValueError("exponent too large")
        return _BINOPS[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNOPS:
        return _UNOPS[type(node.op)](_eval(node.operand))
    raise ValueError(f"unsupported element {type(node).__name__}")


def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression with + - * / // % ** and parentheses.

    Args:
        expression: the expression, e.g. "(23 + 45) * 3".
    """
    if len(expression) > 200:
        return "error: expression longer than 200 characters"
    try:
        value = _eval(ast.parse(expression.replace("×", "*"), mode="eval"))
    except ZeroDivisionError:
        return "error: division by zero"
    except (SyntaxError, ValueError, TypeError) as exc:
        return f"error: cannot evaluate {expression!r}: {exc}"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(round(value, 6) if isinstance(value, float) else value)


def _norm(s: str) -> str:
    return " ".join(s.lower().split())


def make_tools(kb: KB, pages: list[Page]) -> dict[str, Tool]:
    """Build the world's tool set bound to `kb` and `pages`."""
    names = {_norm(e.name): e.name for e in kb.entities}
    known = list(names)  # difflib's candidates, built once rather than on every bad call

    def did_you_mean(entity: str) -> str:
        close = difflib.get_close_matches(_norm(entity), known, n=3, cutoff=0.6)
        if not close:
            return "check the spelling of the name"
        *rest, last = [repr(names[c]) for c in close]  # closest first
        return f"did you mean {', '.join(rest) + ' or ' if rest else ''}{last}?"

    by_id = {p.id: p for p in pages}
    title_tokens = [(p, set(re.findall(r"\w+", p.title.lower()))) for p in pages]

    def lookup(entity: str, relation: str) -> str:
        """Look up one fact about an entity in the knowledge base.

        Args:
            entity: the entity's exact name, e.g. "Vornhal Tessik".
            relation: the relation, e.g. born_in, lives_in, works_for, founded_by, created_by.
        """
        name = names.get(_norm(str(entity)))
        if name is None:
            return f"error: unknown entity {entity!r}; {did_you_mean(str(entity))}"
        value = kb.get(name, str(relation).strip())
        if value is None:
            known = ", ".join(sorted(t.relation for t in kb.out.get(name, [])))
            return f"error: {name} has no relation {relation!r}; known relations: {known}"
        return value

    def calculator(expression: str) -> str:
        """Evaluate an arithmetic expression with + - * / // % ** and parentheses.

        Args:
            expression: the expression, e.g. "(23 + 45) * 3".
        """
        return calculate(str(expression))

    def search(query: str) -> str:
        """Search page titles by keywords and return the top 3 matches with their ids.

        Args:
            query: a few keywords, e.g. an entity name.
        """
        q = set(re.findall(r"\w+", str(query).lower()))
        scored = [(len(q & toks), p) for p, toks in title_tokens if q & toks]
        scored.sort(key=lambda sp: (-sp[0], len(sp[1].title), sp[1].id))
        if not scored:
            return f"no results for {query!r}"
        return "\n".join(f"{i + 1}. [{p.id}] {p.title}" for i, (_, p) in enumerate(scored[:3]))

    def open_page(page_id: str) -> str:
        """Return the full text of a page found by search.

        Args:
            page_id: the id shown in search results, e.g. "page-00042".
        """
        page = by_id.get(str(page_id).strip().strip("[]"))
        return page.text if page else f"error: no page with id {page_id!r}"

    fns = [lookup, calculator, search, open_page]
    return {f.__name__: Tool.from_function(f) for f in fns}
