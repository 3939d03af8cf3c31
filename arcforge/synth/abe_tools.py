"""ABE tool sets: merging overlapping tools, complexity scaling, records, checks, the driver.

`merge_tools` folds tool documents that do the same job (same name, or the same parameters and
similar descriptions) into one, unless that would give one call two different answers.
`scale` applies the four complexity-scaling strategies (see arcforge.synth.abe).
`build_records` writes the ground truth the deployed functions answer from: the sub-answers,
plus (rule route) the graph's facts for every entity of the task, so that calls the solution
does not need still get answers consistent with the ground truth.
`synthesize_abe` runs both routes on the synthesis pipeline (journals, provenance, resume)
and counts every step; `abe_expert` is the scripted solution
(parallel sub-questions as parallel calls in one turn), used by tests and SFT seeding.
"""

from __future__ import annotations

import hashlib
import random
import re
import tempfile
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

from arcforge.chat.validate import validate_call
from arcforge.envs.abe_env import deploy_tools
from arcforge.errors import UserError
from arcforge.synth.abe import (
    EXTRA_PARAMS,
    GENERIC_DISTRACTORS,
    SCALE_OPS,
    SCENARIOS,
    TOOL_NAME,
    ABESpec,
    _rule_doc,
    _schema,
    document_llm,
    spec_from_description,
    spec_from_dict,
    spec_from_graph,
)
from arcforge.synth.batches import LLMGuard, run_batches, step_outputs
from arcforge.synth.pipeline import Drop, Record, Step, filter_step
from arcforge.synth.wkg import SUBJECT_TYPE, WebGraph
from arcforge.types import Message, Task, ToolCall

_STOP = {
    "a",
    "an",
    "the",
    "of",
    "for",
    "to",
    "in",
    "is",
    "and",
    "or",
    "return",
    "returns",
    "get",
    "gets",
    "answers",
    "which",
    "what",
    "given",
}


def _fn(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["function"]


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z]+", text.lower()) if w not in _STOP}


def _overlap(a: dict[str, Any], b: dict[str, Any]) -> bool:
    fa, fb = _fn(a), _fn(b)
    if fa["name"] == fb["name"]:
        return True
    pa, pb = (set(f["parameters"].get("properties", {})) for f in (fa, fb))
    wa, wb = _words(fa.get("description", "")), _words(fb.get("description", ""))
    return pa == pb and bool(wa | wb) and len(wa & wb) / len(wa | wb) >= 0.6


def _conflict(spec: ABESpec, names: set[str]) -> bool:
    """Would merging these tools give the same arguments two different answers?"""
    seen: dict[str, str] = {}
    for s in spec.subs:
        if s.tool in names:
            key = repr(sorted((k, str(v).lower()) for k, v in s.arguments.items()))
            if seen.setdefault(key, s.answer) != s.answer:
                return True
    return False


def merge_tools(spec: ABESpec) -> int:
    """Merge overlapping tool documents in place; returns how many were folded away."""
    kept: list[dict[str, Any]] = []
    rename: dict[str, str] = {}
    for doc in spec.tools:
        name = _fn(doc)["name"]
        target = next(
            (k for k in kept if _overlap(k, doc) and not _conflict(spec, {_fn(k)["name"], name})),
            None,
        )
        if target is None:
            kept.append(doc)
            rename[name] = name
            continue
        tf, f = _fn(target), _fn(doc)
        props = {**f["parameters"].get("properties", {}), **tf["parameters"]["properties"]}
        req = [
            r
            for r in tf["parameters"].get("required", [])
            if r in f["parameters"].get("required", [])
        ]
        tf["parameters"] = {"type": "object", "properties": props, "required": req}
        rename[name] = tf["name"]
        if name in spec.bindings and name != tf["name"]:
            b = spec.bindings.pop(name)
            spec.bindings.setdefault(tf["name"], b)
    merged = len(spec.tools) - len(kept)
    spec.tools = kept
    for s in spec.subs:
        s.tool = rename.get(s.tool, s.tool)
    return merged


def _generalize(spec: ABESpec, graph: WebGraph | None) -> bool:
    """One-argument tools sharing their argument -> get_<arg>_info(arg, field)."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for doc in spec.tools:
        params = _fn(doc)["parameters"]
        if len(params.get("properties", {})) == 1 and len(params.get("required", [])) == 1:
            groups.setdefault(params["required"][0], []).append(doc)
    done = False
    for param, docs in groups.items():
        names = [_fn(d)["name"] for d in docs]
        new = f"get_{param}_info"
        if new in {_fn(d)["name"] for d in spec.tools}:
            continue
        fields = {
            n.removeprefix("get_"): spec.bindings.get(n, {}).get("fields", {}).get("")
            for n in names
        }
        rels = {r for r in fields.values() if r}
        etypes = {SUBJECT_TYPE[r] for r in rels}
        if graph is not None and len(etypes) == 1:  # offer every fact of that entity type
            for r, t in SUBJECT_TYPE.items():
                if t in etypes and r in TOOL_NAME:
                    fields.setdefault(TOOL_NAME[r].removeprefix("get_"), r)
        props = {
            param: _fn(docs[0])["parameters"]["properties"][param],
            "field": {
                "type": "string",
                "enum": sorted(fields),
                "description": "which fact to return",
            },
        }
        spec.tools = [d for d in spec.tools if _fn(d)["name"] not in names]
        spec.tools.append(_schema(new, f"Look up a fact about a {param}.", props, [param, "field"]))
        for s in spec.subs:
            if s.tool in names:
                s.arguments = {**s.arguments, "field": s.tool.removeprefix("get_")}
                s.tool = new
        for n in names:
            spec.bindings.pop(n, None)
        spec.bindings[new] = {"param": param, "fields": {k: v for k, v in fields.items() if v}}
        done = True
    return done


def _add_parameters(spec: ABESpec, rng: random.Random) -> bool:
    for doc in spec.tools:
        props = _fn(doc)["parameters"].setdefault("properties", {})
        for name in rng.sample(sorted(EXTRA_PARAMS), rng.randint(1, 2)):
            props.setdefault(name, dict(EXTRA_PARAMS[name]))
    return bool(spec.tools)


def _generalize_types(spec: ABESpec) -> bool:
    done = False
    for doc in spec.tools:
        params = _fn(doc)["parameters"]
        for name in params.get("required", []):
            p = params["properties"].get(name, {})
            if p.get("type") == "string" and "enum" not in p:
                p["type"] = ["string", "array"]
                p["items"] = {"type": "string"}
                p["description"] = p.get("description", name) + " (or a list of them)"
                done = True
    return done


def _distractors(spec: ABESpec, rng: random.Random, graph: WebGraph | None) -> bool:
    used = {r for b in spec.bindings.values() for r in b["fields"].values()}
    types = {SUBJECT_TYPE[r] for r in used}
    have = {_fn(d)["name"] for d in spec.tools}
    if graph is not None:
        spare = sorted(
            r
            for r, t in SUBJECT_TYPE.items()
            if t in types and r not in used and TOOL_NAME[r] not in have
        )
        for r in rng.sample(spare, min(2, len(spare))):
            doc, param = _rule_doc(r)
            spec.tools.append(doc)
            spec.bindings[TOOL_NAME[r]] = {"param": param, "fields": {"": r}}
    name, desc, param = rng.choice(GENERIC_DISTRACTORS)
    if name not in have:
        props = {param: {"type": "string", "description": param}}
        spec.tools.append(_schema(name, desc, props, [param]))
    return True


def scale(spec: ABESpec, rng: random.Random, ops: list[str], graph: WebGraph | None = None) -> None:
    """Apply complexity-scaling ops in order (generalize first: it reshapes the tools)."""
    unknown = sorted(set(ops) - set(SCALE_OPS))
    if unknown:
        raise UserError(f"unknown ABE scaling op(s) {unknown}; known: {', '.join(SCALE_OPS)}")
    for op in SCALE_OPS:
        if op not in ops:
            continue
        applied = {
            "generalize": lambda: _generalize(spec, graph),
            "add_parameters": lambda: _add_parameters(spec, rng),
            "generalize_types": lambda: _generalize_types(spec),
            "distractors": lambda: _distractors(spec, rng, graph),
        }[op]()
        if applied:
            spec.ops.append(op)


def build_records(spec: ABESpec, graph: WebGraph | None = None) -> None:
    """Sub-answers as records, plus graph facts about every entity the task mentions."""
    recs = [{"tool": s.tool, "arguments": dict(s.arguments), "result": s.answer} for s in spec.subs]
    if graph is not None:
        mentioned = {str(v) for s in spec.subs for v in s.arguments.values()}
        mentioned |= {s.answer for s in spec.subs}
        keys = {(r["tool"], repr(sorted(r["arguments"].items()))) for r in recs}
        for tool, b in spec.bindings.items():
            for entity in sorted(mentioned & set(graph.types)):
                for label, rel in b["fields"].items():
                    objs = graph.objects(entity, rel)
                    args = {b["param"]: entity, **({"field": label} if label else {})}
                    key = (tool, repr(sorted(args.items())))
                    if len(objs) == 1 and key not in keys:
                        keys.add(key)
                        recs.append({"tool": tool, "arguments": args, "result": objs.pop()})
    spec.records = recs


def check_spec(spec: ABESpec) -> str | None:
    """Deploy and replay the required calls: None when every one is valid and returns its
    sub-answer, else the drop reason."""
    names = [_fn(d)["name"] for d in spec.tools]
    if len(names) != len(set(names)):
        return "duplicate_tool"
    tools = deploy_tools({"tools": spec.tools, "records": spec.records})
    for s in spec.subs:
        if validate_call(ToolCall(s.tool, s.arguments), tools) is not None:
            return "invalid_call"
        if tools[s.tool].fn(**s.arguments) != s.answer:
            return "inconsistent_record"
    return None


def abe_expert(task: Task) -> list[Message]:
    """The scripted solution: one assistant turn per dependency level (parallel calls together),
    then the answer."""
    out = []
    for t, turn in enumerate(task.metadata["turns"]):
        calls = [
            ToolCall(c["name"], dict(c["arguments"]), id=f"call-{t}-{i}")
            for i, c in enumerate(turn)
        ]
        out.append(Message("assistant", "", reasoning=f"Step {t + 1}.", tool_calls=calls))
    answer = str(task.validation.answer)
    return out + [Message("assistant", f"Answer: {answer}", reasoning="The tools gave it.")]


def synthesize_abe(
    n: int,
    seed: int = 0,
    graph: WebGraph | None = None,
    descriptions: list[str] | None = None,
    client: Any = None,
    scenarios: tuple[str, ...] = SCENARIOS,
    ops: tuple[str, ...] = SCALE_OPS,
    p_op: float = 0.5,
    work_dir: Path | None = None,
) -> tuple[list[Task], dict[str, Any]]:
    """ABE tasks on the synthesis pipeline: from graph facts (rule route) or from
    `descriptions` with an LLM `client` (LLM route).

    Steps: draft (sample / decompose) -> document -> merge -> scale -> records -> check.
    An unusable model reply drops its description (reason counted, detail in the journal);
    three LLM endpoint failures in a row stop the run.

    Returns:
        (tasks, summary): per-step counts, scenarios and scaling ops of the kept tasks.
    """
    if descriptions is not None and client is None:
        raise UserError("ABE from task descriptions needs an LLM (--llm-url)")
    if descriptions is None and graph is None:
        raise UserError("ABE needs a web knowledge graph or task descriptions")
    llm = LLMGuard("ABE")

    def draft(r: Record) -> Record:
        if descriptions is not None:
            spec = llm(lambda: spec_from_description(r.data["description"], client))
            return Record(r.id, {"spec": asdict(spec)})
        rng = random.Random(f"abe:{seed}:{r.id}")
        spec = spec_from_graph(graph, rng, scenarios[r.data["i"] % len(scenarios)])  # type: ignore[arg-type]
        if spec is None:
            raise Drop("dead_end")
        key = hashlib.sha1(spec.question.encode()).hexdigest()[:12]
        return Record(f"abe-{key}", {"spec": asdict(spec)})

    def build(r: Record) -> Record:
        spec = spec_from_dict(r.data["spec"])
        if descriptions is not None:
            spec = llm(lambda: document_llm(spec, client))
        merged = merge_tools(spec)
        rng = random.Random(f"abe:{seed}:{r.id}:scale")
        scale(spec, rng, [op for op in ops if rng.random() < p_op], graph)
        build_records(spec, graph)
        return Record(r.id, {"spec": asdict(spec), "merged": merged})

    def check(r: Record) -> str | None:
        return check_spec(spec_from_dict(r.data["spec"]))

    steps = [
        Step("draft", draft, on_error="raise"),
        Step("build", build, on_error="raise"),
        filter_step("check", check),
    ]

    def seeds(a: int, b: int) -> list[Record]:
        if descriptions is not None:
            return [Record(f"desc-{i:05d}", {"description": descriptions[i]}) for i in range(a, b)]
        return [Record(f"attempt-{i:05d}", {"i": i}) for i in range(a, b)]

    total = len(descriptions) if descriptions is not None else 20 * n
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(work_dir or tmp)
        kept, counts = run_batches(steps, out, seeds, total, max(20, 2 * n), n, "abe")
        merged = sum(d.get("merged", 0) for d in step_outputs(out, "build"))
    tasks = [spec_from_dict(r.data["spec"]).to_task(f"abe-{seed}-{r.id}") for r in kept[:n]]
    for t, r in zip(tasks, kept):
        t.metadata["provenance"] = r.provenance
    summary = {
        "kept": len(tasks),
        "passed": len(kept),
        "steps": counts,
        "merged_tools": merged,
        "scenarios": dict(Counter(t.metadata["scenario"] for t in tasks)),
        "ops": dict(Counter(op for t in tasks for op in t.metadata["ops"])),
    }
    return tasks, summary
