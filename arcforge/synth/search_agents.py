"""The agents and model checks behind the search-synthesis difficulty filters.

`PlanAgent` is a scripted search agent that acts in the real SearchEnv (bm25s over the same
pages the graph came from) with a budget of searches. It is privileged with the question's
structure (`Task.metadata["plan"]`: start name or description, hops, answer facts) but not with
any entity along the path: it issues the best single query it can (the name of the entity it
must learn about next, or a value from a description), opens the top results, and learns the
facts the knowledge graph holds for each opened page (what a perfect reader of that page
learns). It answers as soon as its knowledge pins the answer down. With 2 searches it is the
GLM-5 shortcut filter ("solved within 2 searches -> too easy"); with a full budget and
different tie-breaking (`pick`) several runs form the answer-uniqueness check.

`engine_solves` is the same shortcut test for a real model (any Engine: a local checkpoint,
or vLLM / SGLang / `arcforge serve` through ServerEngine) run by the agent loop.
`answerable_without_tools` asks a configured model (LLMClient) the bare question;
`paraphrase` asks it to reword a template question, accepted only if every anchor (names,
values) survives and the answer does not leak.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from arcforge.envs.search_env import SearchEnv, SearchIndex, normalize_answer
from arcforge.rewards.math import extract_answer
from arcforge.synth.search_paths import described, follow, matches, plan_parts
from arcforge.synth.wkg import LITERAL_RELATIONS, Fact, WebGraph
from arcforge.types import Message, Task, ToolCall

_HIT = re.compile(r"^\d+\. \[([^\]]+)\]", re.MULTILINE)


@dataclass
class AgentRun:
    answer: str
    reward: float
    searches: int
    opens: int
    queries: list[str] = field(default_factory=list)


def _call(name: str, **args: Any) -> Message:
    return Message("assistant", "", tool_calls=[ToolCall(name, args, id=f"call-{name}")])


def resolve(known: WebGraph, plan: dict, pick: int = 0) -> tuple[str | None, list[str], str | None]:
    """What the agent can conclude from its facts.

    Returns:
        (answer or None, frontier = names/values worth searching next, a guess when ambiguous).
    """
    start, sdesc, hops, adesc = plan_parts(plan)
    if start is not None:
        cur = {start}
    else:
        stype = plan.get("start_type") or None
        cur = described(known, sdesc, stype)
        if not cur:
            partial = sorted(
                {
                    e
                    for c in sdesc
                    for e in matches(known, c)
                    if stype is None or known.types.get(e) == stype
                }
            )
            ranked = sorted(sdesc, key=lambda c: (c.relation in LITERAL_RELATIONS, c.relation))
            return None, partial + [c.value for c in ranked], None
    for hop in hops:
        nxt = follow(known, cur, [hop])
        if not nxt:
            return None, sorted(cur), None
        cur = nxt
    if adesc:
        fit = cur & described(known, adesc)
        if len(fit) == 1:
            return next(iter(fit)), [], None
        pool = sorted(fit or cur)
        return None, sorted(cur - fit), pool[pick % len(pool)]
    if len(cur) == 1:
        return next(iter(cur)), [], None
    pool = sorted(cur)
    return None, pool, pool[pick % len(pool)]


class PlanAgent:
    """A budgeted scripted search agent (see the module docstring).

    Args:
        graph: the web knowledge graph of the indexed pages (the agent's page reader).
        index: the SearchIndex over the same pages.
        max_searches: search calls allowed.
        top_k: results per search; opens_per_search: how many of them it opens.
        pick: which candidate it guesses when its facts leave several.
    """

    def __init__(
        self,
        graph: WebGraph,
        index: SearchIndex,
        max_searches: int,
        top_k: int = 3,
        opens_per_search: int = 3,
        pick: int = 0,
    ) -> None:
        self.graph, self.index, self.max_searches = graph, index, max_searches
        self.top_k, self.opens, self.pick = top_k, opens_per_search, pick

    def run(self, task: Task) -> AgentRun:
        """One episode in a fresh SearchEnv; the env's own verify() gives the reward."""
        env = SearchEnv(self.index, top_k=self.top_k, page_chars=10**6, system_prompt=None)
        env.reset(task)
        plan = task.metadata["plan"]
        known: list[Fact] = []
        queries: list[str] = []
        opens = 0
        answer, guess = None, None
        for _ in range(self.max_searches):
            answer, frontier, guess = resolve(WebGraph(known), plan, self.pick)
            query = next((q for q in frontier if q not in queries), None)
            if answer is not None or query is None:
                break
            queries.append(query)
            obs = env.step(_call("search", query=query)).observations[0].content
            for doc_id in _HIT.findall(obs)[: self.opens]:
                env.step(_call("open", doc_id=doc_id))
                opens += 1
                known += [Fact(*t, page=doc_id) for t in self.graph.by_page.get(doc_id, [])]
        if answer is None:
            answer, _, guess = resolve(WebGraph(known), plan, self.pick)
        final = answer or guess or "unknown"
        env.step(_call("answer", text=final))
        reward = env.verify()
        return AgentRun(final, reward.score, len(queries), opens, queries)


def engine_solves(
    engine: Any,
    tokenizer: Any,
    task: Task,
    index: SearchIndex,
    max_searches: int = 2,
    max_turns: int = 8,
) -> bool:
    """True when a model (any Engine) answers `task` in the real SearchEnv through the agent
    loop with at most `max_searches` searches (greedy decoding)."""
    from arcforge.rollout.agent import AgentConfig, run_episodes

    cfg = AgentConfig(max_turns=max_turns, temperature=0.0)
    (traj,) = run_episodes(engine, tokenizer, lambda t: SearchEnv(index), [task], cfg)
    return traj.reward == 1.0 and traj.reward_details.get("searches", 0) <= max_searches


def answerable_without_tools(client: Any, question: str, answer: str, n: int = 1) -> bool:
    """True when any of `n` tool-less replies of the model contains the answer."""
    msgs = [
        {
            "role": "system",
            "content": "Answer from memory; you have no tools. Reply with the answer only.",
        },
        {"role": "user", "content": question},
    ]
    ref = f" {normalize_answer(answer)} "
    replies = client.chat(msgs, n=n, max_tokens=64, temperature=0.0 if n == 1 else 0.7)
    return any(ref in f" {normalize_answer(extract_answer(r) or r)} " for r in replies)


PARAPHRASE_PROMPT = (
    "Rewrite the question so it reads naturally. Keep its meaning and keep every name and number "
    "exactly as written. Reply with the rewritten question only."
)


def paraphrase(client: Any, question: str, anchors: list[str], answer: str) -> str | None:
    """The model's rewording of `question`, or None when it drops an anchor or leaks the answer."""
    msgs = [{"role": "system", "content": PARAPHRASE_PROMPT}, {"role": "user", "content": question}]
    text = client.chat(msgs, max_tokens=160)[0].strip().strip('"').strip()
    text = text.splitlines()[0].strip() if text else ""
    leak = f" {normalize_answer(answer)} " in f" {normalize_answer(text)} "
    if not text or leak or not all(a in text for a in anchors):
        return None
    return text
