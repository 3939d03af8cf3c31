"""Write docs/config.md, the config reference, from the pydantic models of arcforge's configs.

    .venv/bin/python docs/gen_config_reference.py           # rewrite docs/config.md
    .venv/bin/python docs/gen_config_reference.py --check   # exit 1 if docs/config.md is stale

It starts from `arcforge.run_config.RunCfg`, whose `stages` field is a discriminated union of
every stage kind's model (each in `arcforge/stages/<kind>.py`), and walks the models their
fields hold; the keys every stage has (`StageCfg`) and the policy-loss keys the RL-type stages
share (`LossCfg`) get a section each. For each field it prints the type (with its bounds), the default and a
description. The description is the field's `description=` when it has one, else the comments
the source puts on the field's line and on the comment lines directly above it, else the
attribute docstring below it: the config classes document their fields with comments, so the
reference reads what a reader of the code reads.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib
import inspect
import json
import sys
import textwrap
import typing
from pathlib import Path

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "config.md"
# the order stages run in the default pipeline; kinds not listed follow, sorted
KIND_ORDER = ["pretrain", "midtrain", "synth", "sft", "rl", "agentic_rl", "general_rl", "distill"]


def _models_in(annotation: typing.Any) -> list[type[BaseModel]]:
    """The pydantic model classes an annotation mentions (inside lists, unions, Annotated...)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    out: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        out += _models_in(arg)
    return out


def stage_configs() -> dict[str, type[BaseModel]]:
    """kind -> stage config class (the members of `RunCfg.stages`' union), in pipeline order."""
    run_config = importlib.import_module("arcforge.run_config")
    by_kind: dict[str, type[BaseModel]] = {}
    for cls in _models_in(run_config.RunCfg.model_fields["stages"].annotation):
        for kind in _kinds(cls):
            by_kind.setdefault(kind, cls)
    order = {k: i for i, k in enumerate(KIND_ORDER)}
    return dict(sorted(by_kind.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])))


def _kinds(cls: type[BaseModel]) -> list[str]:
    field = cls.model_fields.get("kind")
    if field is None or typing.get_origin(field.annotation) is not typing.Literal:
        return []
    return [str(a) for a in typing.get_args(field.annotation)]


def _class_source(cls: type) -> tuple[ast.ClassDef, list[str]] | None:
    try:
        lines, _ = inspect.getsourcelines(cls)
    except (OSError, TypeError):
        return None
    src = textwrap.dedent("".join(lines))
    node = ast.parse(src).body[0]
    assert isinstance(node, ast.ClassDef)
    return node, src.splitlines()


def _field_docs(cls: type) -> dict[str, tuple[str, str]]:
    """Field name -> (annotation as written, description from the comments around it).

    A field's description is the comment lines right above it, its inline comment, and the
    comment lines below that continue the inline one (they start in lower case)."""
    parsed = _class_source(cls)
    if parsed is None:
        return {}
    node, lines = parsed
    out: dict[str, tuple[str, str]] = {}
    consumed: set[int] = set()
    for i, stmt in enumerate(node.body):
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        above, j = [], stmt.lineno - 2
        while j >= 0 and lines[j].strip().startswith("#") and j not in consumed:
            above.insert(0, _comment(lines[j]))
            j -= 1
        inline = []
        for k in range(stmt.lineno - 1, stmt.end_lineno):
            at = _comment_start(lines[k])
            if at is not None:
                inline.append(lines[k][at + 1 :].strip())
        k = stmt.end_lineno
        block = []
        while k < len(lines) and lines[k].strip().startswith("#"):
            block.append(k)
            k += 1
        nxt_field = (
            k < len(lines)
            and bool(lines[k].strip())
            and lines[k].strip()[:3] not in ('"""', "def", "@")
        )
        joined = " ".join(inline)
        if block and inline and (not nxt_field or joined.count("(") > joined.count(")")):
            inline += [_comment(lines[m]) for m in block]  # the inline comment goes on
            consumed.update(block)
        doc = ""
        nxt = node.body[i + 1] if i + 1 < len(node.body) else None
        if isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant):
            if isinstance(nxt.value.value, str):
                doc = " ".join(nxt.value.value.split())
        text = " ".join(x for x in [*above, *inline] if x) or doc
        out[stmt.target.id] = (ast.unparse(stmt.annotation), text)
    return out


def _comment(line: str) -> str:
    return line.strip().lstrip("#").strip()


def _comment_start(line: str) -> int | None:
    """Index of the `#` that starts a comment on a code line (not one inside a string)."""
    quote = None
    for idx, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#":
            return idx
    return None


def _bounds(field: typing.Any) -> str:
    marks = {"gt": ">", "ge": "≥", "lt": "<", "le": "≤"}
    out = []
    for meta in field.metadata:
        for attr, sign in marks.items():
            value = getattr(meta, attr, None)
            if value is not None:
                out.append(f"{sign} {value}")
    return ", ".join(out)


def _default(field: typing.Any) -> str:
    if field.is_required():
        return "required"
    if field.default_factory is not None:
        value = field.default_factory()
    else:
        value = field.default
    if value is PydanticUndefined:
        return "required"
    if isinstance(value, BaseModel):
        changed = _changed(value)
        return f"{type(value).__name__}()" + (f" with {changed}" if changed else "")
    return f"`{json.dumps(_plain(value), ensure_ascii=False)}`"


def _changed(value: BaseModel) -> str:
    """`a: 1, b: 2` for the fields of a model default that differ from its class's defaults."""
    try:
        base = type(value)().model_dump(mode="json")
    except Exception:  # a class with required fields: show every field
        base = {}
    now = value.model_dump(mode="json")
    return ", ".join(f"`{k}: {json.dumps(v)}`" for k, v in now.items() if base.get(k) != v)


def _plain(value: typing.Any) -> typing.Any:
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_defaults=True)
    return value


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


# Descriptions for fields whose source carries no comment: "Class.field" first, then "field".
FALLBACK = {
    "RunCfg.name": "the run's name (the default run directory is runs/<name>)",
    "RunCfg.seed": "the run's seed",
    "RunCfg.run_dir": "where the run writes (default: runs/<name>); also `--run-dir`",
    "RunCfg.world": "the generated world (see WorldCfg)",
    "RunCfg.tokenizer": "the tokenizer trained on the world corpus, or a local one",
    "RunCfg.model": "the model: a preset trained from scratch, or a local checkpoint",
    "RunCfg.stages": "the stages, in order; each stage's `kind` picks its settings (below)",
    "RunCfg.eval": "the held-out suites every stage checkpoint is evaluated on",
    "StageCfg.name": "the stage's name: its directory, and how overrides address it",
    "StageCfg.seed": "the stage's seed (data order, sampling)",
    "StageCfg.checkpoint_every": "steps between resumable checkpoints",
    "StageCfg.log_every": "steps between metric lines",
    "WorldCfg.seed": "the world's seed: the same seed gives the same world",
    "WorldCfg.scale": "multiplies every count of the world (tasks, pages, repos)",
    "TokenizerCfg.vocab_size": "BPE vocabulary size, chat special tokens included",
    "TokenizerCfg.train_chars": "characters of the curated corpus the tokenizer trains on",
    "ModelCfg.preset": "a named model size (arcforge.model.presets)",
    "ModelCfg.max_position_embeddings": "the longest context the model is built for",
    "ModelCfg.rope_theta": "RoPE base at initialisation (mid-training may raise it)",
    "ModelCfg.seed": "the initialisation seed",
    "OptimCfg.lr": "peak learning rate (AdamW)",
    "OptimCfg.min_lr_ratio": "the cosine schedule's floor, as a fraction of lr (1: constant)",
    "OptimCfg.warmup_steps": "linear warm-up steps",
    "OptimCfg.weight_decay": "AdamW weight decay",
    "OptimCfg.betas": "AdamW betas",
    "OptimCfg.grad_clip": "gradient-norm clip",
    "ContextStageCfg.seq_len": "sequence length of this context stage",
    "ContextStageCfg.tokens": "tokens trained at this length",
    "ContextStageCfg.rope_theta": "RoPE base for this stage",
    "EvalCfg.suites": "suites evaluated on every stage checkpoint (see docs/evaluation.md)",
    "EvalCfg.max_new_tokens": "new tokens per reply",
    "EvalCfg.batch_size": "prompts decoded together",
    "EvalCfg.seed": "sampling seed: the same items and seeds for every stage (paired changes)",
    "EvalCfg.top_p": "nucleus sampling for the sampled suites",
    "EvalCfg.samples": "k of avg@k: sampled episodes per task for `reasoning` and `*_avg`",
    "SourceCfg.source": "a data source: world:<suite>[:split], jsonl:, parquet:, hf_disk:, git:",
    "SourceCfg.weight": "mixture weight (share of each batch)",
    "LMStageCfg.sources": "corpus sources, mixed by weight",
    "LMStageCfg.seq_len": "sequence length when no context_schedule is given",
    "LMStageCfg.tokens_per_batch": "tokens per optimizer step",
    "LMStageCfg.context_schedule": "mid-training context stages (length, tokens, RoPE base)",
    "LMStageCfg.optim": "optimizer settings",
    "LMStageCfg.curate": "quality filter and MinHash near-duplicate removal of the corpus",
    "LMStageCfg.copy_rows": "share of every batch that is synthetic copy rows (after warm-up)",
    "LMStageCfg.heldout_every": "steps between held-out loss measurements",
    "LMStageCfg.heldout_docs": "held-out documents in that measurement",
    "SFTStageCfg.sources": "message-list sources, mixed by weight",
    "SFTStageCfg.max_len": "longest rendered conversation in tokens (longer ones are cut)",
    "SFTStageCfg.batch_size": "conversations per step",
    "SFTStageCfg.epochs": "passes over the mixture",
    "SFTStageCfg.optim": "optimizer settings",
    "SFTStageCfg.preserve_thinking": "keep earlier turns' thinking in context (else dropped)",
    "sources": "task sources, mixed by weight",
    "steps": "optimizer steps",
    "prompts_per_step": "prompts sampled per step",
    "group_size": "episodes per prompt or task (GRPO group)",
    "groups_per_step": "groups in each training batch",
    "temperature": "sampling temperature",
    "top_p": "nucleus sampling",
    "max_new_tokens": "new tokens per reply",
    "optim": "optimizer settings",
    "loss": "policy loss (arcforge.rl.losses)",
    "clip_low": "lower clip / trust-region bound ε_l",
    "clip_high": "upper clip / trust-region bound ε_h",
    "baseline": "group baseline of the advantage: the mean, or leave-one-out",
    "std_normalize": "divide advantages by the group's standard deviation",
    "kl_coef": "KL penalty to the starting policy (0: none)",
    "engine_precision": "precision of the rollout engine (a real train/inference mismatch)",
    "micro_batch": "rows per forward/backward pass",
    "max_refill_tries": "dynamic sampling: redraw a group whose rewards are all equal, at most "
    "this many times",
    "workers": "rollout workers",
    "backend": "where workers run",
    "mixture_tolerance": "how far a batch's kind shares may stray from the weights",
    "max_retries": "retries of a failed job before it is recorded as failed",
    "weight_sync_timeout": "seconds a weight push may take before it fails",
    "batch_timeout": "seconds to wait for a batch before the stage fails",
    "max_turns": "agent turns per episode",
    "context_budget": "tokens of context before old observations are folded",
    "probe": "dev-set probe and step selection (see ProbeCfg)",
    "ProbeCfg.max_new_tokens": "None: the eval's",
    "EnvServiceCfg.url": "the service's base URL (`arcforge env serve`)",
    "EnvServiceCfg.timeout": "seconds per request",
    "SynthStageCfg.eval": "the stage trains nothing, so it is not evaluated",
    "SynthStageCfg.swe_repos": "world repositories that get synthetic bugs",
    "SynthStageCfg.swe_bugs": "bugs wanted per repository",
    "SynthStageCfg.terminal_seeds": "world terminal tasks used as seeds (0: skip)",
    "SynthStageCfg.search_attempts": "multi-hop paths sampled for search questions",
    "SynthStageCfg.abe_route": "llm: the LLM documents tool sets; rule: from the knowledge graph",
    "SynthStageCfg.terminal_variants": "new tasks asked of the LLM per seed",
    "SynthStageCfg.runs": "verifier runs per task in the stability filter",
    "SynthStageCfg.refine_runs": "verifier runs when the construction agent refines a task",
    "SynthStageCfg.workers": "tasks synthesized in parallel",
    "SynthStageCfg.backend": "sandbox backend (bwrap, docker, local)",
    "SynthStageCfg.llm": "the LLM of the model-driven steps",
    "SynthLLMCfg.base_url": "an OpenAI-compatible endpoint",
    "SynthLLMCfg.model": "the model name sent to it",
    "SynthLLMCfg.api_key_env": "environment variable holding the API key",
    "DistillStageCfg.teachers": "teacher checkpoints and the prompt sources each owns",
    "DistillStageCfg.thinking": "render prompts with the thinking switch on",
    "TeacherCfg.checkpoint": "a stage name of this run, or a checkpoint directory",
    "TeacherCfg.sources": "the prompt sources this teacher scores",
    "TeacherCfg.ratio": "this teacher's share of the prompts",
    "GeneralRLStageCfg.reward": "the hybrid reward (rule gates, ORM, GRM)",
    "GeneralRLStageCfg.orm": "the outcome reward model",
    "GeneralRLStageCfg.grm": "an LLM judge (None: no GRM term)",
    "GeneralRLStageCfg.anchors": "human-written anchor answers",
    "HybridCfg.gates": "rule gates; a reply failing one scores gate_value",
    "HybridCfg.w_rule": "weight of the rule score",
    "HybridCfg.w_orm": "weight of the ORM score",
    "HybridCfg.w_grm": "weight of the GRM score",
    "HybridCfg.gate_value": "the score of a reply that fails a gate",
    "HybridCfg.routes": "per-route overrides of gates and weights",
    "HybridCfg.length_tolerance": "length guard: model scores shrink past (1 + this) x the "
    "reference length",
    "HybridCfg.length_alpha": "length guard's exponent",
    "HybridCfg.disagree_threshold": "|orm - grm| above this is flagged",
    "HybridCfg.on_disagree": "flag: only count; min: both model terms take the lower score",
    "RouteCfg.gates": "this route's gates",
    "RouteCfg.w_rule": "this route's rule weight",
    "RouteCfg.w_orm": "this route's ORM weight",
    "RouteCfg.w_grm": "this route's GRM weight",
    "OrmCfg.path": "a saved reward model directory",
    "OrmCfg.train": "train one at stage start with these settings",
    "GrmCfg.base_url": "the judge's OpenAI-compatible endpoint",
    "GrmCfg.model": "the judge model's name",
    "GrmCfg.api_key_env": "environment variable holding the API key",
    "GrmCfg.k": "judge samples per reply (averaged)",
    "GrmCfg.retries": "re-asks when a reply has no parsable score",
    "GrmCfg.temperature": "the judge's sampling temperature",
    "GrmCfg.max_tokens": "the judge's reply budget",
    "GrmCfg.timeout": "seconds per request",
    "GrmCfg.workers": "parallel requests",
    "AnchorCfg.enabled": "mix anchors into the prompt pool",
    "RewardModelCfg.sources": "preference pairs",
    "RewardModelCfg.steps": "training steps",
    "RewardModelCfg.batch_size": "pairs per step",
    "RewardModelCfg.max_len": "tokens per prompt + reply",
    "RewardModelCfg.margin": "Bradley-Terry margin",
    "RewardModelCfg.seed": "training seed",
    "RewardModelCfg.optim": "optimizer settings",
}


def _fallback(cls: type, name: str) -> str:
    for klass in cls.__mro__:
        text = FALLBACK.get(f"{klass.__name__}.{name}")
        if text:
            return text
    return FALLBACK.get(name, "")


def _table(cls: type[BaseModel], own_only: bool, skip: set[str] = frozenset()) -> list[str]:
    docs: dict[str, tuple[str, str]] = {}
    for klass in reversed(cls.__mro__):
        if isinstance(klass, type) and issubclass(klass, BaseModel) and klass is not BaseModel:
            docs.update(_field_docs(klass))
    own = set(_field_docs(cls)) if own_only else set(cls.model_fields)
    rows = ["| field | type | default | description |", "|---|---|---|---|"]
    for name, field in cls.model_fields.items():
        if name in skip or name not in own:
            continue
        annotation, text = docs.get(name, (str(field.annotation), ""))
        text = field.description or text or _fallback(cls, name)
        bounds = _bounds(field)
        kind = f"`{annotation}`" + (f" ({bounds})" if bounds else "")
        rows.append(f"| `{name}` | {_cell(kind)} | {_cell(_default(field))} | {_cell(text)} |")
    return rows


def _nested(classes: list[type[BaseModel]], seen: set[type]) -> list[type[BaseModel]]:
    """Models held by the fields of `classes` (recursively), not yet in `seen`."""
    out: list[type[BaseModel]] = []
    queue = list(classes)
    while queue:
        cls = queue.pop(0)
        for field in cls.model_fields.values():
            for sub in _models_in(field.annotation):
                if sub not in seen:
                    seen.add(sub)
                    out.append(sub)
                    queue.append(sub)
    return out


def _summary(cls: type) -> str:
    doc = inspect.getdoc(cls) or ""
    if cls.__doc__ is None or doc == inspect.getdoc(BaseModel):
        return ""
    return " ".join(doc.split("\n\n")[0].split())


def _world_options() -> list[str]:
    """Tables of the world generator's settings, which `world.options` sets (a dataclass)."""
    try:
        world_cls = importlib.import_module("arcforge.world.world_config").WorldConfig
    except (ImportError, AttributeError):
        return []
    out = [
        "## World options (`world.options`)",
        "",
        "Keys of `world.options`, checked when the world is built (`seed` and `scale` come",
        "from `world.seed` and `world.scale`). Counts are multiplied by `scale`.",
        "",
    ]
    queue, seen = [world_cls], {world_cls}
    while queue:
        cls = queue.pop(0)
        if cls is not world_cls:
            out += [f"### `{cls.__name__}` (`world.options.{_option_key(world_cls, cls)}`)", ""]
            out += [_summary(cls), ""]
        docs = _field_docs(cls)
        out += ["| option | type | default | description |", "|---|---|---|---|"]
        for f in dataclasses.fields(cls):
            if cls is world_cls and f.name in ("seed", "scale"):
                continue
            annotation, text = docs.get(f.name, (str(f.type), ""))
            if f.default_factory is not dataclasses.MISSING:
                value = f.default_factory()
            else:
                value = f.default
            if dataclasses.is_dataclass(value):
                if type(value) not in seen:
                    seen.add(type(value))
                    queue.append(type(value))
                default = f"{type(value).__name__}()"
            else:
                default = f"`{json.dumps(_plain(value))}`"
            out.append(f"| `{f.name}` | `{_cell(annotation)}` | {_cell(default)} | {_cell(text)} |")
        out.append("")
    return out


def _option_key(world_cls: type, cls: type) -> str:
    for f in dataclasses.fields(world_cls):
        if f.default_factory is not dataclasses.MISSING and type(f.default_factory()) is cls:
            return f.name
    return cls.__name__


def render() -> str:
    config = importlib.import_module("arcforge.config")
    stages = stage_configs()
    run_cls = importlib.import_module("arcforge.run_config").RunCfg
    stage_base, loss_base = config.StageCfg, config.LossCfg
    out = [
        "# Config reference",
        "",
        "Generated from the pydantic models by `docs/gen_config_reference.py`; do not edit by",
        "hand. A run config is YAML: the top-level keys below, and `stages`, an ordered list in",
        "which each stage's `kind` picks its settings. Any key can be overridden on the command",
        "line (`arcforge run CONFIG stages.sft.epochs=2 eval.n=50`); an unknown key or a wrong",
        "type stops the run with one line naming the key and the file. What each stage does:",
        "docs/stages.md.",
        "",
        "## Run (top level)",
        "",
        _summary(run_cls),
        "",
        *_table(run_cls, own_only=False),
        "",
    ]
    seen: set[type] = {run_cls, stage_base, loss_base, *stages.values()}
    top_nested = _nested([run_cls], seen)
    with_loss = [k for k, c in stages.items() if issubclass(c, loss_base)]
    out += [
        "## Every stage",
        "",
        "Every stage has these keys; the stage kinds below add their own.",
        "",
        *_table(stage_base, own_only=False, skip={"kind"}),
        "",
        "## The policy loss (stage kinds " + ", ".join(f"`{k}`" for k in with_loss) + ")",
        "",
        _summary(loss_base),
        "These stage kinds have these keys too; a stage kind that sets its own default or",
        "choices for one lists it again in its table.",
        "",
        *_table(loss_base, own_only=False),
        "",
    ]
    by_class: dict[type, list[str]] = {}
    for kind, cls in stages.items():
        by_class.setdefault(cls, []).append(kind)
    for cls, kinds in by_class.items():
        names = " and ".join(f"`{k}`" for k in kinds)
        title = f"## Stage kind{'s' if len(kinds) > 1 else ''} {names} (`{cls.__name__}`)"
        out += [title, "", _summary(cls), ""]
        common = set(stage_base.model_fields)
        if issubclass(cls, loss_base):  # unless the stage class declares them itself
            common |= set(loss_base.model_fields) - set(_field_docs(cls))
        out += [*_table(cls, own_only=False, skip=common), ""]
    nested = top_nested + _nested(list(stages.values()), seen)
    if nested:
        out += ["## Nested settings", ""]
        for cls in nested:
            out += [f"### `{cls.__name__}`", "", _summary(cls), "", *_table(cls, False), ""]
    out += _world_options()
    text = "\n".join(out)
    while "\n\n\n" in text:
        text = text.replace("\n\n\n", "\n\n")
    return text.rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if docs/config.md is stale")
    parser.add_argument("--out", type=Path, default=OUT, help="where to write (docs/config.md)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    text = render()
    if args.check:
        current = args.out.read_text() if args.out.is_file() else ""
        if current != text:
            print(f"{args.out} is out of date: run python docs/gen_config_reference.py")
            return 1
        return 0
    args.out.write_text(text)
    print(f"wrote {args.out} ({text.count(chr(10))} lines)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
