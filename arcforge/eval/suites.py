"""Evaluation suites: each scores one checkpoint on the world's held-out tasks.

A suite is a function `(Evaluator, EvalCfg) -> SuiteOutput` registered in `SUITES`: per-item
scores (averaged into score ± 95% CI by the harness) plus a few examples for the report.
Generation is greedy, except in `reasoning`, with the same held-out tasks and order for every
stage, so differences between stages are differences between checkpoints.

- lm_loss       mean next-token loss on held-out world documents (lower is better)
- reasoning     arithmetic word problems, final answer checked with math-verify; avg@k: k
                seeded samples per task at eval.temperature (the policy RL optimizes; the
                way reasoning models are reported), per-task mean scores, CI over tasks
- reasoning_greedy
                the same tasks, one greedy reply each
- tool_format   share of replies to tool-use prompts that contain a well-formed, schema-valid
                tool call (success with real tools is measured by the environment suites)
- long_context  a fact placed far back in a long document, asked for at the end (plain LM)
- long_context_nll
                the same items teacher-forced: mean loss (nats) per token of the right answer
                after the whole document (lower is better): what a context stage bought, even
                for a model that cannot yet produce the answer
- chat          instructions with checkable constraints, all satisfied = 1
- general       the same held-out instructions scored by general RL's rule reward (gates:
                format, required/forbidden content, JSON; then the share of constraints met)
- general_loose instruction-level accuracy (IFEval's loose view): the share of constraints met
                by any well-formed reply (format gate only), partial credit for weak models
- backend, chained, explore
                CC-Bench-style engineering suites (arcforge.eval.engineering)
- tool, search, code, terminal, swe, tir
                agent episodes in the real environments (arcforge.envs; code, terminal, swe
                and tir run in the bwrap sandbox), reward = the environment's verdict
- tool_avg, search_avg, code_avg, terminal_avg, swe_avg, tir_avg
                the same episodes sampled: avg@k, k = eval.samples seeded episodes per task at
                eval.temperature / top_p, per-task mean reward, CI over tasks. Agentic
                benchmarks are reported this way (the mean of several sampled runs), and it is
                the policy RL trains: greedy decoding of a small model is all-or-nothing per
                item and can stay put while the sampled success rate moves.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import torch
import torch.nn.functional as F

from arcforge.chat import validate_call
from arcforge.config import EvalCfg
from arcforge.data.packing import HELDOUT_SEQ_LEN
from arcforge.device import model_device
from arcforge.eval.copying import suite_copy
from arcforge.eval.engineering import ENGINEERING_SUITES
from arcforge.eval.evaluator import Evaluator, SuiteOutput, strip_end
from arcforge.eval.swarm_suite import SWARM_SUITES
from arcforge.rewards.math import exact_match, math_reward
from arcforge.stats import LOWER_IS_BETTER  # noqa: F401  (re-exported)
from arcforge.types import Task
from arcforge.world.text.demos import fixed_body


def suite_lm_loss(ev: Evaluator, cfg: EvalCfg) -> SuiteOutput:
    docs = ev.world.heldout_corpus()[: cfg.n_for("lm_loss")]
    scores = []
    seq_len = HELDOUT_SEQ_LEN
    with torch.inference_mode():
        for d in docs:
            ids = ev.tokenizer(d.text, add_special_tokens=False)["input_ids"][: seq_len + 1]
            if len(ids) < 8:
                continue
            x = torch.tensor([ids], device=model_device(ev.model))  # (1, T+1)
            logits = ev.model(input_ids=x[:, :-1]).logits.float()  # (1, T, V)
            scores.append(F.cross_entropy(logits[0], x[0, 1:]).item())
    return SuiteOutput(scores)


def _reasoning(ev: Evaluator, cfg: EvalCfg, suite: str, sampled: bool) -> SuiteOutput:
    tasks = ev.world.tasks("reasoning", "test")[: cfg.n_for(suite)]
    k = cfg.samples if sampled else 1
    sampling = (cfg.temperature, cfg.top_p, k, cfg.seed) if sampled else None
    outs = ev.chat(tasks, cfg.max_new_tokens, sampling=sampling)
    scores, ex = [], []
    for i, t in enumerate(tasks):
        rs = []
        for o in outs[i * k : (i + 1) * k]:
            rs.append(math_reward(ev.parse(o).content, t.validation.answer or ""))
        scores.append(sum(rs) / k)
        if len(ex) < 3:
            ex.append(
                {
                    "prompt": t.instruction,
                    "output": outs[i * k],
                    "answer": t.validation.answer,
                    "score": rs[0],
                }
            )
    return SuiteOutput(scores, ex)


def suite_reasoning(ev: Evaluator, cfg: EvalCfg) -> SuiteOutput:
    return _reasoning(ev, cfg, "reasoning", sampled=True)


def suite_reasoning_greedy(ev: Evaluator, cfg: EvalCfg) -> SuiteOutput:
    return _reasoning(ev, cfg, "reasoning_greedy", sampled=False)


def suite_tool_format(ev: Evaluator, cfg: EvalCfg) -> SuiteOutput:
    tasks = ev.world.tasks("tool", "test")[: cfg.n_for("tool_format")]
    tools = ev.world.tools()
    outs = ev.chat(tasks, cfg.max_new_tokens, with_tools=True)
    scores, ex = [], []
    for t, o in zip(tasks, outs):
        parsed = ev.parse(o)
        offered = {n: tools[n] for n in t.tools if n in tools}
        ok = (
            bool(parsed.tool_calls)
            and not parsed.errors
            and all(validate_call(c, offered) is None for c in parsed.tool_calls)
        )
        scores.append(1.0 if ok else 0.0)
        if len(ex) < 3:
            ex.append(
                {"prompt": t.instruction, "output": o, "score": float(ok), "errors": parsed.errors}
            )
    return SuiteOutput(scores, ex)


def suite_long_context_nll(ev: Evaluator, cfg: EvalCfg) -> SuiteOutput:
    tasks = ev.world.tasks("long_context", "test")[: cfg.n_for("long_context_nll")]
    limit = int(getattr(ev.model.config, "max_position_embeddings", 2048))
    scores, ex = [], []
    with torch.inference_mode():
        for t in tasks:
            ctx = ev.tokenizer(t.instruction + "\nAnswer:", add_special_tokens=False)["input_ids"]
            ans = ev.tokenizer(" " + (t.validation.answer or ""), add_special_tokens=False)[
                "input_ids"
            ]
            ids = (ctx + ans)[-limit:]
            x = torch.tensor([ids], device=model_device(ev.model))  # (1, T)
            logits = ev.model(input_ids=x[:, :-1]).logits.float()[0]  # (T-1, V)
            k = len(ans)
            nll = F.cross_entropy(logits[-k:], x[0, -k:]).item()  # the answer's k tokens
            scores.append(nll)
            if len(ex) < 3:
                ex.append({"answer": t.validation.answer, "context_tokens": len(ctx), "nll": nll})
    return SuiteOutput(scores, ex)


def suite_long_context(ev: Evaluator, cfg: EvalCfg) -> SuiteOutput:
    tasks = ev.world.tasks("long_context", "test")[: cfg.n_for("long_context")]
    prompts = [
        ev.tokenizer(t.instruction + "\nAnswer:", add_special_tokens=False)["input_ids"]
        for t in tasks
    ]
    outs = ev.complete(prompts, 12)
    scores, ex = [], []
    for i, (t, o) in enumerate(zip(tasks, outs)):
        pred = strip_end(o).splitlines()[0].strip() if strip_end(o) else ""
        s = exact_match("Answer: " + pred, t.validation.answer or "")
        scores.append(s)
        if len(ex) < 3:
            ex.append(
                {
                    "question": t.instruction[-200:],
                    "output": o,
                    "answer": t.validation.answer,
                    "prompt_tokens": len(prompts[i]),
                }
            )
    return SuiteOutput(scores, ex)


def suite_chat(ev: Evaluator, cfg: EvalCfg) -> SuiteOutput:
    from arcforge.world import check_constraints

    tasks = ev.world.tasks("chat", "test")[: cfg.n_for("chat")]
    outs = ev.chat(tasks, cfg.max_new_tokens)
    scores, ex = [], []
    for t, o in zip(tasks, outs):
        content = ev.parse(o).content
        frac, _ = check_constraints(content, t.validation.constraints)
        s = 1.0 if frac >= 1.0 else 0.0
        scores.append(s)
        if len(ex) < 3:
            ex.append({"prompt": t.instruction, "output": o, "score": s})
    return SuiteOutput(scores, ex)


def _general_suite(
    name: str, gates: tuple[str, ...]
) -> Callable[[Evaluator, EvalCfg], SuiteOutput]:
    """Held-out chat tasks scored by general RL's `rule_reward` with `gates`."""

    def run(ev: Evaluator, cfg: EvalCfg) -> SuiteOutput:
        from arcforge.rewards.rules import rule_reward

        tasks = ev.world.tasks("chat", "test")[: cfg.n_for(name)]
        outs = ev.chat(tasks, cfg.max_new_tokens)
        scores, ex = [], []
        for t, o in zip(tasks, outs):
            p = ev.parse(o)
            r = rule_reward(
                p.content, t, gates=gates, parse_errors=p.errors, n_tool_calls=len(p.tool_calls)
            )
            scores.append(r.score)
            if len(ex) < 3:
                ex.append(
                    {
                        "prompt": t.instruction,
                        "output": o,
                        "score": r.score,
                        "gate_failed": r.details["gate_failed"],
                    }
                )
        return SuiteOutput(scores, ex)

    return run


def by_hops(tasks: list[Task], scores: list[float]) -> dict[str, list[int]] | None:
    """{hop count: [solved, n]} for suites whose tasks carry metadata["hops"] (tool, search),
    as multi-hop QA results are reported per hop; None for the others."""
    hops = [t.metadata.get("hops") for t in tasks]
    if not hops or not all(isinstance(h, int) for h in hops):
        return None
    out: dict[str, list[int]] = {}
    for h, s in sorted(zip(hops, scores)):
        cell = out.setdefault(str(h), [0, 0])
        cell[0] += int(s >= 1.0)
        cell[1] += 1
    return out


def reference_solution(task: Task) -> str | None:
    """The item's answer: `metadata["solution"]`, or for a world SWE bug the fixed body of its
    function (several bugs in one function have one fix)."""
    if task.metadata.get("solution"):
        return str(task.metadata["solution"])
    if task.kind == "swe" and "fixed" in task.metadata and "bug" in task.context:
        return "swe:" + fixed_body(task)
    return None


def solution_clusters(tasks: list[Task]) -> list[str] | None:
    """Per item, a short id of its reference solution (`reference_solution`), or None when
    no two items share one. The code suite asks each held-out function several times with
    another example in the prompt and other hidden tests: those items have one answer, so a
    change on them is one observation, not several (the report's clustered interval)."""
    keys = [reference_solution(t) or f"\0{t.id}" for t in tasks]
    if len(set(keys)) == len(keys):
        return None
    return [hashlib.sha1(k.encode()).hexdigest()[:10] for k in keys]


def _env_suite(suite: str, sampled: bool = False) -> Callable[[Evaluator, EvalCfg], SuiteOutput]:
    """An agentic suite: episodes in the task kind's environment, scored by verify(); greedy,
    or with `sampled` k = eval.samples seeded episodes per task at eval.temperature (avg@k: the
    item's score is its mean success; outcomes and by_hops count every episode, `episodes`
    keeps each task's first)."""
    name = f"{suite}_avg" if sampled else suite

    def run(ev: Evaluator, cfg: EvalCfg) -> SuiteOutput:
        from arcforge.envs.registry import env_factory
        from arcforge.eval.failures import episode_record, tally
        from arcforge.rollout.agent import AgentConfig, run_episodes

        tasks = ev.world.tasks(suite, "test")[: cfg.n_for(name)]  # tir: reasoning problems
        budget = int(getattr(ev.model.config, "max_position_embeddings", 2048))
        k = cfg.samples if sampled else 1
        acfg = AgentConfig(
            max_turns=cfg.max_turns,
            max_new_tokens=cfg.max_new_tokens,
            context_budget=budget,
            temperature=cfg.temperature if sampled else 0.0,
            top_p=cfg.top_p if sampled else 1.0,
            seed=cfg.seed if sampled else None,
        )
        trajs = run_episodes(ev.engine, ev.tokenizer, env_factory(ev.world), tasks, acfg, k)
        each = [t for t in tasks for _ in range(k)]  # run_episodes is task-major
        ex = [
            {
                "task": t.instruction[:300],
                "reward": tr.reward,
                "finish": tr.finish_reason,
                "last": tr.messages[-1].content[:300] if tr.messages else "",
            }
            for t, tr in list(zip(each, trajs))[: 3 * k : k]
        ]
        records = [episode_record(t, tr) for t, tr in zip(each, trajs)]
        solved = [float(tr.reward >= 1.0) for tr in trajs]
        scores = [sum(solved[i : i + k]) / k for i in range(0, len(solved), k)]
        return SuiteOutput(
            scores,
            ex,
            outcomes=tally(e["outcome"] for e in records),
            episodes=records[::k],
            by_hops=by_hops(each, solved),
            clusters=solution_clusters(tasks),
        )

    return run


ENV_SUITES = ("tool", "search", "code", "terminal", "swe", "tir")
SUITES: dict[str, Callable[[Evaluator, EvalCfg], SuiteOutput]] = {
    "lm_loss": suite_lm_loss,
    "reasoning": suite_reasoning,
    "reasoning_greedy": suite_reasoning_greedy,
    "tool_format": suite_tool_format,
    "long_context": suite_long_context,
    "long_context_nll": suite_long_context_nll,
    "chat": suite_chat,
    **{k: _env_suite(k) for k in ENV_SUITES},
    **{f"{k}_avg": _env_suite(k, sampled=True) for k in ENV_SUITES},
    "general": _general_suite("general", ("format", "required", "forbidden", "json")),
    "general_loose": _general_suite("general_loose", ("format",)),
    "copy": suite_copy,
    **ENGINEERING_SUITES,
    **SWARM_SUITES,
}
