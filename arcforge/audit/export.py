"""The world as files, and the one enumeration of what training reads.

`export_world(world, out, stages)` writes
    out/suites/<suite>/{train,test}.jsonl   one task a line: id, prompt (the text the model is
                                            shown), reference (answer, code body, fix patch,
                                            shell command, path, ...), plus kind and, where the
                                            model writes code, `solution` (the text it writes)
    out/text/<source>.jsonl                 {"text": ...} a line: every text a training stage of
                                            `stages` reads, one file per source
    out/text/manifest.json                  per source: texts, chars, which stages read it, and
                                            what could not be read without a run
so anyone can audit the splits with their own tools.

`training_texts` is the single answer to "what does training read"; the contamination check
(arcforge.audit.contamination) uses the same function. It walks every stage config for data
sources (any `source:` entry: stage sources, distillation teachers, ORM training pairs), adds
general RL's anchors and the synthesis stages' inputs, and renders each record as text:
LM and SFT stages read the whole record (a chat's messages with reasoning and tool-call
arguments), RL-kind stages read only prompts (the reference answer is never shown to the
policy), and a preference pair's replies count too (a reward model trains on them). `world:` sources resolve through the stage layer's own resolver, so the texts are the
ones training gets. Simplifications, each toward reading more rather than less:
- expert episodes come from the run's cache (RUN_DIR/world/episodes) when there is one; without
  a run they are the scripted experts' replies (rollout.policies.expert_script, no model and no
  sandbox) to every train task of each kind with a nonzero count, tool observations left out;
- `world:<suite>:unseen` (train tasks no demo shows) reads as the whole train split;
- `jsonl:{run_dir}/...` files that an earlier stage of a run writes are read when they exist and
  listed as missing otherwise.
It lives above the stage layer (arcforge.audit), so it may resolve sources through the stages'
own code; the pipeline, the report and the CLI use it, nothing below does.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arcforge.types import Message, Task

# the suites the eval harness scores, by the world pool (or generator) that feeds them
EXPORT_SUITES = (
    "reasoning",
    "tir",
    "tool",
    "chat",
    "long_context",
    "code",
    "terminal",
    "swe",
    "search",
    "explore",
    "chains",
)
# eval suite name -> the exported suite its items come from
EVAL_TO_SUITE = {
    "reasoning": "reasoning",
    "reasoning_greedy": "reasoning",
    "tir": "tir",
    "tir_avg": "tir",
    "tool": "tool",
    "tool_avg": "tool",
    "tool_format": "tool",
    "chat": "chat",
    "general": "chat",
    "general_loose": "chat",
    "long_context": "long_context",
    "long_context_nll": "long_context",
    "code": "code",
    "code_avg": "code",
    "terminal": "terminal",
    "terminal_avg": "terminal",
    "swe": "swe",
    "swe_avg": "swe",
    "search": "search",
    "search_avg": "search",
    "explore": "explore",
    "chained": "chains",
}
GENERATED_N = 100  # explore / chains items per split when no eval config gives a count
RL_KINDS = ("rl", "agentic_rl", "general_rl", "distill")  # stages that read prompts only


# ---- suites ----------------------------------------------------------------------------------


def suite_tasks(world: Any, suite: str, split: str, n: int | None = None) -> list[Task]:
    """A suite's tasks as the eval harness draws them: explore and chains, unless the world holds
    a pool of them, come from their generators (a pure function of the world's seed and the
    split; their train split is what the generator gives, no stage reads it)."""
    if suite in getattr(world, "task_pools", {}) or suite not in ("explore", "chains"):
        tasks = world.tasks(suite, split)
        return tasks[:n] if n else tasks
    if suite == "explore":
        from arcforge.world.tasks.explore import explore_tasks

        return explore_tasks(world.repos, world.config.seed, n or GENERATED_N, split)
    from arcforge.world.tasks.chains import chain_tasks

    return chain_tasks(world.config.seed, n or GENERATED_N, split)


def reference_of(task: Task) -> str:
    """The item's reference answer or solution text."""
    m = task.metadata
    if task.kind == "swe":
        return str(m.get("patch") or "")
    if task.kind == "explore":
        return str(m.get("target") or "")
    if task.kind == "chain":
        return "\n".join(s["solution"] for s in m.get("steps", []))
    if task.kind in ("code", "terminal", "chat"):
        return str(m.get("solution") or task.validation.answer or "")
    return str(task.validation.answer or m.get("solution") or "")


def solution_of(task: Task) -> str | None:
    """The text a model writes to solve the item, where it differs from `reference_of`: a code
    task's body (the reply completes a shown stub), a world SWE bug's fixed function body."""
    if task.kind == "code" and task.metadata.get("body"):
        return str(task.metadata["body"])
    if task.kind == "swe" and "bug" in task.context:
        from arcforge.world.text.demos import fixed_body

        try:
            return fixed_body(task)
        except (KeyError, IndexError, ValueError):  # a task without the oracle's fixed code
            return None
    return None


def item(task: Task) -> dict[str, Any]:
    """One exported line: id, prompt, reference (+ kind, split, solution where it differs)."""
    row: dict[str, Any] = {
        "id": task.id,
        "kind": task.kind,
        "split": task.split,
        "prompt": task.instruction,
        "reference": reference_of(task),
    }
    sol = solution_of(task)
    if sol is not None:
        row["solution"] = sol
    return row


def split_tasks(
    world: Any, suite: str, counts: dict[str, int] | None = None
) -> tuple[list[Task], list[Task]]:
    """(train, test) tasks of a suite; `counts[suite]` caps the test split (the eval's n for it)
    and sizes both splits of a generated suite."""
    n = (counts or {}).get(suite)
    generated = suite in ("explore", "chains") and suite not in getattr(world, "task_pools", {})
    train = suite_tasks(world, suite, "train", n if generated else None)
    return train, suite_tasks(world, suite, "test", n)


def suite_items(world: Any, counts: dict[str, int] | None = None) -> dict[str, dict[str, list]]:
    """{suite: {"train": [item], "test": [item]}} of every exported suite (`split_tasks`)."""
    out = {}
    for s in EXPORT_SUITES:
        train, test = split_tasks(world, s, counts)
        out[s] = {"train": [item(t) for t in train], "test": [item(t) for t in test]}
    return out


# ---- what training reads ---------------------------------------------------------------------


@dataclass
class TrainingText:
    """The texts of one training source and the stages that read it."""

    source: str
    texts: list[str] = field(default_factory=list)
    stages: list[str] = field(default_factory=list)
    missing: str | None = None  # why nothing could be read (a file a run writes)


def _sources_in(obj: Any) -> list[str]:
    """Every `source` string in a stage config dump (stage sources, teachers, ORM pairs)."""
    if isinstance(obj, dict):
        found = [obj["source"]] if isinstance(obj.get("source"), str) else []
        return found + [s for v in obj.values() for s in _sources_in(v)]
    if isinstance(obj, list):
        return [s for v in obj for s in _sources_in(v)]
    return []


def message_text(m: Message) -> str:
    """A message as SFT reads it: role, reasoning, content and tool-call arguments."""
    parts = [f"{m.role}:"]
    if m.reasoning:
        parts.append(m.reasoning)
    if m.content:
        parts.append(m.content)
    for c in m.tool_calls:
        parts.append(f"{c.name}({json.dumps(c.arguments, ensure_ascii=False)})")
        parts += [v for v in c.arguments.values() if isinstance(v, str) and "\n" in v]
    return "\n".join(parts)


def record_text(rec: Any, prompts_only: bool) -> str:
    """A data record (arcforge.data.sources.Record) as the text a stage reads: a preference
    pair's replies too (a reward model trains on them)."""
    if rec.text is not None:
        return rec.text
    if rec.messages is not None:
        return "\n".join(message_text(m) for m in rec.messages)
    replies = [str(rec.meta[k]) for k in ("chosen", "rejected") if rec.meta.get(k) is not None]
    if replies:
        return "\n".join([rec.prompt or "", *replies])
    if prompts_only:
        return rec.prompt or ""
    return f"{rec.prompt}\n{rec.answer or ''}"


def _episode_texts(
    world: Any, run_dir: Path | None, kind: str | None
) -> tuple[list[str], str | None]:
    """Expert episodes: the run's cached ones, else the scripted experts' replies (and how many
    train tasks had no script, if any)."""
    from arcforge.rollout.policies import expert_script, opening_text
    from arcforge.synth.episodes import KIND_SUITE, EpisodeDemo

    cache = run_dir / "world" / "episodes" if run_dir else None
    kinds = [kind] if kind else list(KIND_SUITE)
    out, failed = [], 0
    for k in kinds:
        path = cache / f"{k}.jsonl" if cache else None
        if path is not None and path.exists():
            lines = [ln for ln in path.read_text().splitlines() if ln.strip()]
            out += [
                "\n".join(message_text(m) for m in EpisodeDemo.from_dict(json.loads(ln)).messages)
                for ln in lines
            ]
            continue
        if world.config.n(getattr(world.config.episodes, k, 0), 0) == 0:
            continue
        if k == "swarm":  # the orchestrator's script (its subagents' replies are observations)
            from arcforge.world.tasks.wide_search import swarm_expert_script, swarm_tasks

            n = world.config.n(world.config.episodes.swarm, 0)
            for t in swarm_tasks(world, "train")[:n]:
                msgs = [Message("user", t.instruction), *swarm_expert_script(t)]
                out.append("\n".join(message_text(m) for m in msgs))
            continue
        for t in world.tasks(k, "train"):
            try:
                msgs = [Message("user", opening_text(t)), *expert_script(t)]
            except (KeyError, IndexError, ValueError):  # the task lacks its oracle data
                failed += 1
                continue
            out.append("\n".join(message_text(m) for m in msgs))
    return out, (f"{failed} train tasks have no scripted expert reply" if failed else None)


def _source_texts(
    world: Any, spec: str, run_dir: Path | None, prompts_only: bool
) -> tuple[list[str], str | None]:
    """(texts, why missing) of one source spec."""
    from arcforge.data.sources import KINDS, load_records, parse_source
    from arcforge.stages.world_source import world_records

    if "{run_dir}" in spec:
        if run_dir is None:
            return [], "written by a stage of a run (no run directory given)"
        spec = spec.replace("{run_dir}", str(run_dir))
    from arcforge.data.reasoning_gym import is_reasoning_gym, load_reasoning_gym

    if is_reasoning_gym(spec):  # generated by the package, as the RL stage loads it
        return [record_text(r, prompts_only) for r in load_reasoning_gym(spec)], None
    src = parse_source(spec)
    if src.kind != "world":
        if src.kind in KINDS and not Path(src.target).exists():  # a file not written yet
            return [], f"{src.target} does not exist (yet)"
        return [record_text(r, prompts_only) for r in load_records(src)], None
    if src.target == "episodes" or src.target.startswith("episodes/"):
        kind = src.target.split("/", 1)[1] if "/" in src.target else None
        return _episode_texts(world, run_dir, kind)
    split = "train" if src.split == "unseen" else src.split
    recs = world_records(world, src.target, split)
    return [record_text(r, prompts_only) for r in recs], None


def _synth_inputs(world: Any, stage: dict) -> list[str]:
    """What a synthesis stage reads from the world (its outputs reach training through the
    `jsonl:` sources of later stages): repo files, terminal seeds and how-to pages, search
    questions; GEM's texts are corpus texts, read as `world:corpus` already."""
    texts: list[str] = []
    for repo in world.repos[: int(stage.get("swe_repos") or 0)]:
        texts += [f"# {repo.name}: {p}\n{s}" for p, s in {**repo.files, **repo.tests}.items()]
    if stage.get("terminal_seeds"):
        texts += [
            t.instruction for t in world.tasks("terminal", "train")[: stage["terminal_seeds"]]
        ]
    if stage.get("terminal_pages"):
        from arcforge.world.text.tutorials import tutorial_pages

        texts += [p["text"] for p in tutorial_pages(world, int(stage["terminal_pages"]))]
    n_search = max(int(stage.get("abe") or 0), 0)
    texts += [t.instruction for t in world.tasks("search", "train")[:n_search]]
    return texts


def source_file_name(source: str) -> str:
    """A file stem for a source spec: `world:sft/chat` -> `world_sft_chat`."""
    return re.sub(r"[^A-Za-z0-9]+", "_", source).strip("_")[:120] or "source"


def training_texts(
    world: Any, stages: list[Any], run_dir: Path | None = None
) -> dict[str, TrainingText]:
    """Every text the given training stages read, by source (see the module header).

    Args:
        world: the run's World.
        stages: the run config's stages (StageCfg models or their dumps).
        run_dir: the run directory, for `{run_dir}` files and cached expert episodes.

    Returns:
        {source name: TrainingText}, in the order stages first read them.
    """
    out: dict[str, TrainingText] = {}
    for st in stages:
        d = st if isinstance(st, dict) else st.model_dump(mode="json")
        name, kind = d["name"], d["kind"]
        prompts_only = kind in RL_KINDS
        for spec in dict.fromkeys(_sources_in(d)):
            key = f"{spec} (prompts)" if prompts_only else spec
            if key not in out:
                texts, missing = _source_texts(world, spec, run_dir, prompts_only)
                out[key] = TrainingText(key, texts, [], missing)
            out[key].stages.append(name)
        anchors = d.get("anchors") or {}
        if kind == "general_rl" and anchors.get("enabled", True) and anchors.get("weight", 1):
            from arcforge.rewards.anchors import anchor_tasks

            key = "anchors"
            if key not in out:
                tasks = anchor_tasks(anchors.get("path"))
                texts = [f"{t.instruction}\n{t.metadata.get('anchor', '')}" for t in tasks]
                out[key] = TrainingText(key, texts)
            out[key].stages.append(name)
        if kind == "synth":
            out[f"synth_inputs:{name}"] = TrainingText(
                f"synth_inputs:{name}", _synth_inputs(world, d), [name]
            )
    return out


# ---- writing ---------------------------------------------------------------------------------


def _write_lines(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def export_world(
    world: Any,
    out: str | Path,
    stages: list[Any],
    run_dir: Path | None = None,
    counts: dict[str, int] | None = None,
) -> dict[str, Any]:
    """Write out/suites/ and out/text/ (module header); returns a summary of what was written.

    Args:
        world: the World to export.
        out: the directory to write into (created).
        stages: the run config's stages, whose sources make `text/`.
        run_dir: a run directory (its `{run_dir}` files and cached episodes), if any.
        counts: per exported suite, the test items the eval scores (and explore/chains sizes).
    """
    out = Path(out)
    summary: dict[str, Any] = {"suites": {}, "text": {}}
    for suite, splits in suite_items(world, counts).items():
        for split, rows in splits.items():
            _write_lines(out / "suites" / suite / f"{split}.jsonl", rows)
        summary["suites"][suite] = {k: len(v) for k, v in splits.items()}
    manifest = {}
    for key, tt in training_texts(world, stages, run_dir).items():
        fname = f"{source_file_name(key)}.jsonl"
        _write_lines(out / "text" / fname, [{"text": t} for t in tt.texts])
        manifest[key] = {
            "file": fname,
            "texts": len(tt.texts),
            "chars": sum(len(t) for t in tt.texts),
            "stages": tt.stages,
            "missing": tt.missing,
        }
    (out / "text" / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    summary["text"] = manifest
    return summary
