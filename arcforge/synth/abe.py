"""ABE: tool environments built automatically from task descriptions (Automated Build Environments).

    task description -> sub-questions (one of four scenarios) -> one tool document per
    sub-question (OpenAI schema) -> merge overlapping tools -> complexity scaling -> records
    (the ground-truth sub-answers) -> deploy (arcforge.envs.abe_env) -> check -> Task(kind="abe")

Scenarios: single_hop (one lookup), parallel_single_hop (independent lookups, one turn),
multi_hop (a chain: each sub-question uses the previous answer), parallel_multi_hop (two
chains side by side). Two routes produce the same `ABESpec`:
- rule route (`spec_from_graph`): sub-questions are facts of the web knowledge graph, tools are
  named after the relation ("get_employer(person)"), and the graph also backs extra records so
  that exploring calls get answers consistent with the ground truth;
- LLM route (`spec_from_description` + `document_llm`): a model decomposes a free-text task and
  writes one tool document per sub-question with the call's arguments.
Complexity scaling: generalize (several one-argument tools -> `get_<param>_info(x, field)`),
add_parameters (optional arguments that do not change the answer), generalize_types (a name
argument also accepts a list), distractors (tools the task does not need).
`check_spec` deploys the tools and replays the required calls: every call must be schema-valid
and return its sub-answer, else the spec is dropped (the reason is counted).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any

from arcforge.errors import UserError
from arcforge.llm import ask_json
from arcforge.synth.wkg import LITERAL_RELATIONS, SUBJECT_TYPE, WebGraph
from arcforge.types import Task, Tool, Validation
from arcforge.world.tasks.questions import QUESTION

SCENARIOS = ("single_hop", "parallel_single_hop", "multi_hop", "parallel_multi_hop")
SCALE_OPS = ("generalize", "add_parameters", "generalize_types", "distractors")
TOOL_NAME = {
    "born_in": "get_birthplace",
    "lives_in": "get_home_city",
    "works_for": "get_employer",
    "born_year": "get_birth_year",
    "occupation": "get_occupation",
    "located_in": "get_country",
    "population": "get_population",
    "founded_by": "get_founder",
    "headquartered_in": "get_headquarters",
    "founded_year": "get_founding_year",
    "industry": "get_industry",
    "created_by": "get_creator",
    "published_by": "get_publisher",
    "published_year": "get_publication_year",
    "work_type": "get_work_type",
    "capital": "get_capital",
}
PARAM = {
    "person": "person",
    "city": "city",
    "country": "country",
    "org": "organisation",
    "work": "work",
}
EXTRA_PARAMS = {
    "language": {
        "type": "string",
        "enum": ["en", "fr", "de"],
        "description": "language of the reply",
    },
    "include_sources": {"type": "boolean", "description": "also list sources"},
    "max_results": {"type": "integer", "description": "cap on returned items"},
}
GENERIC_DISTRACTORS = [
    ("get_weather", "Current weather for a city.", "city"),
    ("translate_text", "Translate a text into English.", "text"),
    ("get_stock_price", "Latest stock price of a listed company.", "ticker"),
]


@dataclass
class SubQuestion:
    id: str
    question: str
    answer: str
    depends_on: str | None = None
    tool: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)
    relation: str | None = None  # rule route: the graph relation behind it


@dataclass
class ABESpec:
    scenario: str
    question: str
    answer: str
    subs: list[SubQuestion]
    tools: list[dict[str, Any]] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    ops: list[str] = field(default_factory=list)
    # rule route: tool -> {"param": its entity argument, "fields": {field label: relation}}
    bindings: dict[str, dict[str, Any]] = field(default_factory=dict)

    def turns(self) -> list[list[SubQuestion]]:
        """Sub-questions grouped by dependency depth: each group can run as parallel calls."""
        depth: dict[str, int] = {}
        for s in self.subs:
            depth[s.id] = depth[s.depends_on] + 1 if s.depends_on in depth else 0
        return [[s for s in self.subs if depth[s.id] == d] for d in range(max(depth.values()) + 1)]

    def to_task(self, task_id: str) -> Task:
        required = [{"name": s.tool, "arguments": s.arguments} for s in self.subs]
        ctx = {
            "abe": {
                "scenario": self.scenario,
                "tools": self.tools,
                "records": self.records,
                "required_calls": required,
            }
        }
        meta = {
            "scenario": self.scenario,
            "ops": self.ops,
            "sub_questions": [
                {"id": s.id, "question": s.question, "answer": s.answer, "depends_on": s.depends_on}
                for s in self.subs
            ],
            "turns": [
                [{"name": s.tool, "arguments": s.arguments} for s in t] for t in self.turns()
            ],
        }
        difficulty = min(1.0, len(self.subs) / 5 + 0.1 * len(self.ops))
        names = [t["function"]["name"] for t in self.tools]
        return Task(
            task_id,
            "abe",
            self.question,
            context=ctx,
            tools=names,
            validation=Validation(answer=self.answer),
            source="synth:abe",
            difficulty=difficulty,
            metadata=meta,
        )


def spec_from_dict(d: dict[str, Any]) -> ABESpec:
    """The inverse of `dataclasses.asdict(spec)` (specs travel through the pipeline as JSON)."""
    subs = [SubQuestion(**q) for q in d["subs"]]
    return ABESpec(
        d["scenario"],
        d["question"],
        d["answer"],
        subs,
        list(d["tools"]),
        list(d["records"]),
        list(d["ops"]),
        dict(d["bindings"]),
    )


def _schema(name: str, description: str, props: dict[str, Any], required: list[str]) -> dict:
    """The OpenAI function-tool schema of a tool taking the object `props` (`required` keys)."""
    params = {"type": "object", "properties": props, "required": required}
    return Tool(name, description, params).schema()


# ---------------------------------------------------------------- rule route


def _chain(
    graph: WebGraph,
    rng: random.Random,
    k: int,
    etype: str | None = None,
    relations: list[str] | None = None,
):
    """A forward path of k functional hops as [(subject, relation, object)] (following
    `relations` when given), or None."""
    starts = [e for e in graph.entities if etype is None or graph.types.get(e) == etype]
    node = rng.choice(starts) if starts else None
    path = []
    for i in range(k):
        opts = [
            (r, o)
            for r, o in graph.out.get(node, [])
            if r in TOOL_NAME
            and (i == k - 1 or r not in LITERAL_RELATIONS)
            and (relations is None or r == relations[i])
        ]
        if node is None or not opts:
            return None
        r, o = rng.choice(sorted(opts))
        path.append((node, r, o))
        node = o
    return path


def _rule_doc(relation: str) -> tuple[dict[str, Any], str]:
    etype = SUBJECT_TYPE[relation]
    param = PARAM[etype]
    art = "an" if param[0] in "aeiou" else "a"
    noun = QUESTION[relation].format(s=f"{art} {param}").rstrip("?")
    props = {param: {"type": "string", "description": f"the {param}'s exact name"}}
    return _schema(TOOL_NAME[relation], f"Answers: {noun}?", props, [param]), param


def spec_from_graph(graph: WebGraph, rng: random.Random, scenario: str) -> ABESpec | None:
    """A spec whose sub-questions are graph facts (None when sampling dead-ends)."""
    multi = scenario.endswith("multi_hop")
    parallel = scenario.startswith("parallel")
    first = _chain(graph, rng, rng.choice([2, 3]) if multi else 1)
    if first is None:
        return None
    chains = [first]
    if parallel:
        etype = graph.types.get(first[0][0])
        same = [r for _, r, _ in first] if rng.random() < 0.7 else None  # "A and B" lookups
        second = _chain(graph, rng, len(first), etype, same)
        if second is None or second[0][0] == first[0][0]:
            return None
        chains.append(second)
    subs: list[SubQuestion] = []
    for c, chain in enumerate(chains):
        prev = None
        for i, (s, r, o) in enumerate(chain):
            doc, param = _rule_doc(r)
            sid = f"q{c + 1}.{i + 1}"
            ref = s if prev is None else f"the answer to {prev}"
            subs.append(
                SubQuestion(sid, QUESTION[r].format(s=ref), o, prev, TOOL_NAME[r], {param: s}, r)
            )
            prev = sid
    question = " ".join(_chain_question(ch) for ch in chains)
    answer = ", ".join(ch[-1][2] for ch in chains)
    if parallel:
        question = "Answer both questions. " + question + " Give both answers, comma-separated."
    tools = [_rule_doc(s.relation)[0] for s in subs if s.relation]  # one per sub-question
    bindings = {
        TOOL_NAME[r]: {"param": PARAM[SUBJECT_TYPE[r]], "fields": {"": r}}
        for r in {s.relation for s in subs if s.relation}
    }
    return ABESpec(scenario, question, answer, subs, tools, bindings=bindings)


def _chain_question(chain: list[tuple[str, str, str]]) -> str:
    from arcforge.world.tasks.questions import NOUN

    phrase = chain[0][0]
    for _, r, _ in chain[:-1]:
        phrase = NOUN[r].format(s=phrase)
    text = QUESTION[chain[-1][1]].format(s=phrase)
    return text[0].upper() + text[1:]


# ---------------------------------------------------------------- LLM route

DECOMPOSE_PROMPT = (
    "Decompose the task into sub-questions that each need one tool call. Reply with JSON only: "
    '{"scenario": one of single_hop | parallel_single_hop | multi_hop | parallel_multi_hop, '
    '"question": the task as a question, "answer": the final answer, "sub_questions": '
    '[{"id": "q1", "question": "...", "answer": "...", "depends_on": null or an earlier id}]}'
)
DOCUMENT_PROMPT = (
    "Write one tool for each sub-question, as an OpenAI function schema, and the call that "
    'answers it. Reply with JSON only: {"tools": [{"sub_question": id, "name": snake_case, '
    '"description": "...", "parameters": {"type": "object", "properties": {...}, "required": '
    '[...]}, "arguments": {...}}]}'
)


def spec_from_description(description: str, client: Any) -> ABESpec:
    """Scenario decomposition of a free-text task by an LLM.

    Raises:
        UserError: when the model's decomposition is unusable (names what is wrong).
    """
    d = ask_json(
        client,
        [{"role": "system", "content": DECOMPOSE_PROMPT}, {"role": "user", "content": description}],
    )
    if not isinstance(d, dict) or d.get("scenario") not in SCENARIOS:
        raise UserError(f"ABE decomposition: scenario must be one of {SCENARIOS}; got {d!r:.200}")
    subs, ids = [], set()
    for i, q in enumerate(d.get("sub_questions") or []):
        if not isinstance(q, dict) or not q.get("question") or q.get("answer") in (None, ""):
            raise UserError(f"ABE decomposition: sub-question {i} needs question and answer")
        sid, dep = str(q.get("id") or f"q{i + 1}"), q.get("depends_on")
        if dep is not None and str(dep) not in ids:
            raise UserError(f"ABE decomposition: {sid} depends on unknown {dep!r}")
        ids.add(sid)
        subs.append(
            SubQuestion(
                sid, str(q["question"]), str(q["answer"]), None if dep is None else str(dep)
            )
        )
    if not subs or not d.get("answer"):
        raise UserError("ABE decomposition: needs an answer and at least one sub-question")
    return ABESpec(d["scenario"], str(d.get("question") or description), str(d["answer"]), subs)


def document_llm(spec: ABESpec, client: Any) -> ABESpec:
    """Tool documents (and the answering call) for every sub-question, written by an LLM."""
    listing = "\n".join(f"{s.id}: {s.question} (answer: {s.answer})" for s in spec.subs)
    d = ask_json(
        client,
        [
            {"role": "system", "content": DOCUMENT_PROMPT},
            {"role": "user", "content": f"Task: {spec.question}\n{listing}"},
        ],
    )
    items = d.get("tools") if isinstance(d, dict) else None
    by_sub = {str(t.get("sub_question")): t for t in items or [] if isinstance(t, dict)}
    for s in spec.subs:
        t = by_sub.get(s.id)
        params = t.get("parameters") if t else None
        if (
            not t
            or not re.fullmatch(r"[A-Za-z_]\w*", str(t.get("name", "")))
            or not (isinstance(params, dict) and isinstance(params.get("properties"), dict))
        ):
            raise UserError(
                f"ABE documents: no valid tool (name, parameters.properties) for {s.id}"
            )
        params.setdefault("type", "object")
        s.tool, s.arguments = str(t["name"]), dict(t.get("arguments") or {})
        spec.tools.append(
            _schema(
                s.tool,
                str(t.get("description", "")),
                params["properties"],
                list(params.get("required") or []),
            )
        )
    return spec
