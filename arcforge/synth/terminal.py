"""Terminal task synthesis: seeds or web pages -> verified Harbor task directories.

Routes into one pipeline (synth/pipeline.py: resumable, parallel, counted):

    seed  --expand-->  N drafts            an LLM drafts variants of a seed task
    page  --draft--->  1 draft             pages with >= 3 code blocks and explicit steps only
    draft --construct--> task directory    the construction agent (an LLM) writes the task as
                                           JSON; we lay it out in the Harbor format:
        task.toml  instruction.md  environment/init.sh  solution/solve.sh
        tests/test.sh (fixed wrapper: runs tests/check.sh, exit 0 = pass, writes Harbor's
        /logs/verifier/reward.txt)  tests/check.sh  tests/<files>
          then self-repair: import the directory, run the oracle and the empty solution in the
          sandbox; on failure (oracle fails, or the verifier passes without any solution) feed
          the outputs back to the LLM and rewrite, at most `repair_rounds` times
    task  --refine--> accepted task        check-task: oracle passes `runs`/`runs` (5), the
                                           empty solution fails every run, every exploit probe
                                           fails to fool the verifier

Paths in what the LLM writes are the container's (/app the working directory, /tests the
hidden tests); the Harbor importer maps them into the sandbox. Docker images cannot be built
here, so the environment is a shell script (environment/init.sh) run in the sandbox before the
agent starts. Simplification: the construction agent answers in one JSON message per round
rather than working in the sandbox with tools.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arcforge.envs.check import check_task
from arcforge.envs.importers import import_harbor
from arcforge.llm import LLMClient, LLMError, clip
from arcforge.synth.pipeline import Drop, Pipeline, Record, Step

EXPAND_PROMPT = (
    "You design shell tasks for training terminal agents. Seed task:\n\n{seed}\n\n"
    "Write {n} new tasks of the same kind but different (other files, tools, formats or "
    "checks). Each must be doable offline with bash, coreutils and python3, and checkable by "
    'a script. Reply with a JSON list of {{"title": str, "instruction": str}}.'
)
PAGE_PROMPT = (
    "Below is a technical web page. Turn what it teaches into one shell task for a terminal "
    "agent, doable offline with bash, coreutils and python3, whose result a script can check.\n"
    'Reply with JSON {{"title": str, "instruction": str}}.\n\nPage "{title}":\n\n{text}'
)
CONSTRUCT_PROMPT = (
    "Build an executable, verifiable terminal task from this draft.\n\nTitle: {title}\n"
    "Draft: {instruction}\n\nThe agent works in /app (the working directory) with bash. Reply "
    "with one JSON object:\n"
    '{{"instruction": "what the agent is told", "init": "bash run before the agent starts '
    '(create /app files)", "solution": "bash that solves the task", "check": "bash run after '
    'the agent, cwd /app, exit 0 iff the task is done; hidden files are under /tests", '
    '"test_files": {{"name": "content"}}}}\nCheck the resulting state (files, outputs of '
    "programs on fresh inputs), never how it was done."
)
REPAIR_PROMPT = (
    "Your task did not validate: {problem}\n\nOutputs:\n{outputs}\n\nFix the task (the "
    "instruction, init, solution, check or test files) and reply with the whole corrected JSON "
    "object in the same format."
)
_CODE_BLOCK = re.compile(r"```|<pre\b|<code\b", re.I)
_STEP = re.compile(r"^\s*(?:\d+[.)]\s+\S|step\s+\d+\b)|<li\b", re.I | re.M)
TEST_SH = """#!/bin/bash
# arcforge terminal synthesis: run the task's check, exit code 0 = pass (Harbor reward file too)
mkdir -p /logs/verifier
cd /app
bash /tests/check.sh
rc=$?
if [ $rc -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
exit $rc
"""


@dataclass
class TerminalSynthConfig:
    """n_variants: drafts per seed. include_seed: the seed itself is a draft too (kept even
    when expansion fails; the failure is recorded in its `expansion` field).
    repair_rounds: self-repair rounds after the first try.
    runs: refine runs (oracle n/n, empty 0/n). probes: exploit probes (None: all).
    workers: tasks built in parallel. backend: sandbox backend."""

    llm: LLMClient
    n_variants: int = 5
    include_seed: bool = False
    repair_rounds: int = 3
    runs: int = 5
    probes: list[str] | None = None
    workers: int = 2
    backend: str = "bwrap"
    temperature: float = 0.7
    extra: dict[str, Any] = field(default_factory=dict)


def page_is_tutorial(text: str, min_blocks: int = 3, min_steps: int = 2) -> bool:
    """Keep pages with >= `min_blocks` code blocks and explicit numbered steps."""
    fences = len(_CODE_BLOCK.findall(text))
    blocks = fences // 2 if "```" in text else fences
    return blocks >= min_blocks and len(_STEP.findall(text)) >= min_steps


def _draft(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, dict) or not str(value.get("instruction") or "").strip():
        raise Drop(
            "malformed draft", f"{where}: expected {{title, instruction}}, got {clip(value)}"
        )
    return {"title": str(value.get("title") or "task"), "instruction": str(value["instruction"])}


def expand_seed(rec: Record, cfg: TerminalSynthConfig) -> list[Record]:
    """A seed record {"instruction"} -> up to n_variants draft records (plus the seed itself
    with `include_seed`)."""
    prompt = EXPAND_PROMPT.format(seed=rec.data["instruction"], n=cfg.n_variants)

    def seed_draft(expansion: str) -> Record:
        return rec.child(
            "seed",
            {
                "title": "seed",
                "instruction": rec.data["instruction"],
                "seed": rec.id,
                "expansion": expansion[:300],
            },
        )

    def seed_only(err: Drop) -> list[Record]:
        if not cfg.include_seed:
            raise err
        return [seed_draft(f"{err.reason}: {err.detail}")]

    try:
        drafts = cfg.llm.chat_json(
            [{"role": "user", "content": prompt}], temperature=cfg.temperature, max_tokens=1500
        )
    except LLMError as err:
        return seed_only(Drop("expansion LLM failed", str(err)))
    if isinstance(drafts, dict):
        drafts = drafts.get("tasks") or [drafts]
    if not isinstance(drafts, list):
        return seed_only(Drop("malformed draft", f"expected a list, got {clip(drafts)}"))
    try:
        out = [
            rec.child(i, {**_draft(d, f"variant {i}"), "seed": rec.id})
            for i, d in enumerate(drafts[: cfg.n_variants])
        ]
    except Drop as err:
        return seed_only(err)
    if cfg.include_seed:
        out.insert(0, seed_draft("ok"))
    return out


def draft_from_page(rec: Record, cfg: TerminalSynthConfig) -> Record:
    """A page record {"title", "text"} -> one draft, if the page is a tutorial."""
    text = rec.data.get("text") or rec.data.get("html") or ""
    if not page_is_tutorial(text):
        raise Drop("not a tutorial page")
    prompt = PAGE_PROMPT.format(title=rec.data.get("title", ""), text=text[:6000])
    try:
        d = cfg.llm.chat_json([{"role": "user", "content": prompt}], max_tokens=800)
    except LLMError as err:
        raise Drop("page LLM failed", str(err)) from None
    return rec.child("task", {**_draft(d, "page"), "page": rec.data.get("url", rec.id)})


def _spec(value: Any) -> dict[str, Any]:
    """Validate the construction agent's JSON; ValueError names what is missing."""
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {type(value).__name__}")
    missing = [
        k for k in ("instruction", "solution", "check") if not str(value.get(k) or "").strip()
    ]
    if missing:
        raise ValueError(f"missing {', '.join(missing)}")
    files = value.get("test_files") or {}
    if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
        raise ValueError("test_files must map file names to text")
    bad = [
        n
        for n in files
        if n.startswith("/") or ".." in n.split("/") or n in ("test.sh", "check.sh")
    ]
    if bad:
        raise ValueError(f"test_files has unusable names {bad}")
    return value


def write_task_dir(root: Path, spec: dict[str, Any], meta: dict[str, Any]) -> Path:
    """Lay a construction spec out as a Harbor task directory (see the module docstring)."""
    if root.exists():
        shutil.rmtree(root)
    for sub in ("environment", "solution", "tests"):
        (root / sub).mkdir(parents=True)
    toml = "\n".join(
        [
            'version = "1.0"',
            "",
            "[metadata]",
            'author_name = "arcforge synth"',
            f"category = {json.dumps(meta.get('category', 'synthetic'))}",
            f"source = {json.dumps(str(meta.get('source', '')))}",
            "",
            "[verifier]",
            "timeout_sec = 120.0",
            "",
        ]
    )
    (root / "task.toml").write_text(toml)
    (root / "instruction.md").write_text(spec["instruction"].strip() + "\n")
    (root / "environment" / "init.sh").write_text(str(spec.get("init") or "true") + "\n")
    (root / "solution" / "solve.sh").write_text("#!/bin/bash\n" + spec["solution"] + "\n")
    (root / "tests" / "test.sh").write_text(TEST_SH)
    (root / "tests" / "check.sh").write_text(spec["check"] + "\n")
    for name, text in (spec.get("test_files") or {}).items():
        (root / "tests" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "tests" / name).write_text(text)
    return root


def validate_dir(root: Path, backend: str) -> str | None:
    """None when the oracle passes and the empty solution fails once; else the problem with
    the outputs the LLM needs to repair it."""
    task = import_harbor(root)
    if task.metadata.get("unsupported"):
        return "unsupported here: " + "; ".join(task.metadata["unsupported"])
    oracle = check_task(task, backend=backend)
    if oracle["reward"] < 1.0:
        d = oracle["details"]
        outs = {
            k: str(d.get(k, ""))[-1500:] for k in ("init", "solution_output", "output", "error")
        }
        return "the solution does not pass the check.\n" + json.dumps(outs, indent=1)
    empty = check_task(task, empty=True, backend=backend)
    if empty["reward"] >= 1.0:
        return (
            "the check passes before anything is done (an empty solution passes); it must "
            "fail until the task is solved.\n" + str(empty["details"].get("output", ""))[-800:]
        )
    return None


def construct(rec: Record, out_dir: Path, cfg: TerminalSynthConfig) -> Record:
    """Construction agent + self-repair: draft -> a Harbor directory whose oracle passes."""
    d = rec.data
    convo = [{"role": "user", "content": CONSTRUCT_PROMPT.format(**d)}]
    root = out_dir / "tasks" / re.sub(r"[^\w.-]", "_", rec.id)
    problem = ""
    for attempt in range(cfg.repair_rounds + 1):
        try:
            raw = cfg.llm.chat_json(convo, max_tokens=2000)
        except LLMError as err:
            raise Drop("construction LLM failed", str(err)) from None
        try:
            spec = _spec(raw)
        except ValueError as err:
            problem = f"the JSON is not a usable task: {err}"
        else:
            write_task_dir(root, spec, {"source": d.get("page") or d.get("seed") or rec.id})
            problem = validate_dir(root, cfg.backend) or ""
            if not problem:
                return Record(rec.id, {**d, "task_dir": str(root), "repair_rounds": attempt})
        convo += [
            {"role": "assistant", "content": json.dumps(raw)},
            {
                "role": "user",
                "content": REPAIR_PROMPT.format(problem=problem.split("\n", 1)[0], outputs=problem),
            },
        ]
    shutil.rmtree(root, ignore_errors=True)
    raise Drop("self-repair exhausted", problem[:500])


def refine(rec: Record, cfg: TerminalSynthConfig) -> Record:
    """Refine checks: stability over cfg.runs and every exploit probe (check-task)."""
    from arcforge.synth.checktask import check_task_exploits

    res = check_task_exploits(
        rec.data["task_dir"], runs=cfg.runs, backend=cfg.backend, probes=cfg.probes
    )
    if not res["accepted"]:
        fooled = sorted(n for n, v in res["probes"].items() if v)
        reason = f"exploitable: {fooled[0]}" if fooled else "unstable verifier"
        raise Drop(reason, "; ".join(res["reasons"])[:1000])
    return Record(rec.id, {**rec.data, "check": res})


def synthesize_terminal(
    out_dir: str | Path,
    cfg: TerminalSynthConfig,
    seeds: list[str] = (),
    pages: list[dict[str, Any]] = (),
) -> list[Record]:
    """Seeds (instructions) and/or pages ({"url", "title", "text"}) -> accepted task dirs
    under `<out_dir>/tasks/`; counts in `<out_dir>/summary.json`."""
    out = Path(out_dir)
    recs = [Record(f"seed{i:03d}", {"kind": "seed", "instruction": s}) for i, s in enumerate(seeds)]
    recs += [Record(f"page{i:03d}", {"kind": "page", **p}) for i, p in enumerate(pages)]

    def draft(rec: Record) -> list[Record] | Record:
        return expand_seed(rec, cfg) if rec.data["kind"] == "seed" else draft_from_page(rec, cfg)

    steps = [
        Step("draft", draft),
        Step("construct", lambda r: construct(r, out, cfg)),
        Step("refine", lambda r: refine(r, cfg)),
    ]
    return Pipeline(steps, out, workers=cfg.workers, name="terminal").run(recs)
