"""Typed run and stage configs: YAML in, pydantic models out, `a.b=value` overrides.

A run config names the world, the tokenizer, the model and an ordered list of stages. Each stage
has a `kind` that picks its config class from `STAGE_CONFIGS`; later stage kinds (RL, distill,
...) register themselves there. Unknown keys are errors naming the key and the file; so are
wrong types. Overrides address stages by name (`stages.sft.lr=1e-4`) or index (`stages.2.lr=...`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from arcforge.errors import ConfigError

DEFAULT_CONFIG = Path(__file__).resolve().parent.parent / "configs" / "demo.yaml"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class SourceCfg(Strict):
    """One data source with its mixture weight (see arcforge.data.sources for the schemes)."""

    source: str
    weight: float = Field(1.0, gt=0)
    # keep this source's tasks whose `difficulty` lies in [lo, hi] (RL stages; it replaces the
    # stage's `difficulty` for this source): e.g. the search questions of one hop, where the
    # demo's SFT checkpoint solves some, while the tool and TIR pools keep every task
    difficulty: tuple[float, float] | None = None

    @field_validator("difficulty")
    @classmethod
    def _band(cls, v: tuple[float, float] | None) -> tuple[float, float] | None:
        if v is not None and not 0.0 <= v[0] <= v[1] <= 1.0:
            raise ValueError(f"difficulty must be [lo, hi] with 0 <= lo <= hi <= 1, got {list(v)}")
        return v


class WorldCfg(Strict):
    seed: int = 0
    scale: float = Field(1.0, gt=0)
    options: dict[str, Any] = {}  # extra WorldConfig fields, checked when the world is built


class TokenizerCfg(Strict):
    vocab_size: int = Field(2048, ge=300)
    path: str | None = None  # a local tokenizer dir; default: trained on the world corpus
    train_chars: int = Field(3_000_000, gt=0)
    # Which spaces become their own token before BPE (arcforge.model.tokenizer.SPACE_SPLITS):
    # "upper" keeps " Vofe" and "Vofe" on the same tokens, so a name copied into a tool call's
    # JSON needs no space-stripping remap; "letter" does it for every word (+25% tokens).
    space_split: Literal["none", "upper", "letter"] = "none"


class ModelCfg(Strict):
    preset: str = "tiny"
    path: str | None = None  # any local HF causal-LM checkpoint dir; replaces preset + tokenizer
    max_position_embeddings: int = 2048
    rope_theta: float = 10000.0
    seed: int = 0
    overrides: dict[str, Any] = {}  # extra HF config fields for the preset
    # untied embeddings + a planted induction circuit at init, so a tiny model learns to copy
    # from its context (arcforge/model/prime.py); pair with the LM stage's copy_rows
    prime_induction: bool = False

    @model_validator(mode="after")
    def _prime_needs_fresh_init(self) -> ModelCfg:
        if self.prime_induction and self.path:
            raise ValueError(
                "model.prime_induction initialises a preset from scratch; a model.path "
                "checkpoint is already trained: remove one of them"
            )
        for key in ("attention_bias", "tie_word_embeddings"):
            if self.prime_induction and key in self.overrides:
                raise ValueError(f"model.prime_induction sets {key} itself; drop it from overrides")
        return self


class OptimCfg(Strict):
    """A stage's optimizer (arcforge.train.optim)."""

    # adamw; muon: Muon (torch.optim.Muon's update) on the hidden matrices and AdamW on
    # embeddings, head, routers, norms and biases, one lr for both; muon_split: muon with
    # MLA's up-projections (q_b_proj, kv_b_proj) orthogonalised per attention head
    name: Literal["adamw", "muon", "muon_split"] = "adamw"
    muon_momentum: float = Field(0.95, ge=0, lt=1)  # Muon's Nesterov momentum
    # DSA's lightning indexer gets no gradient from the LM loss (its top-k is not
    # differentiable); frozen, it also stays fixed under any other loss, so rollout and
    # training select the same keys (no-op for models without DSA)
    freeze_indexer: bool = True
    lr: float = Field(1e-3, gt=0)
    min_lr_ratio: float = Field(0.1, ge=0, le=1)
    warmup_steps: int = Field(20, ge=0)
    weight_decay: float = Field(0.1, ge=0)
    betas: tuple[float, float] = (0.9, 0.95)
    grad_clip: float = Field(1.0, gt=0)


class ContextStageCfg(Strict):
    """One mid-training context stage: train `tokens` tokens at `seq_len` with RoPE base."""

    seq_len: int = Field(gt=8)
    tokens: int = Field(gt=0)
    rope_theta: float = Field(10000.0, gt=0)


class EngineCfg(Strict):
    """The rollout engine (arcforge.rollout.engine.make_engine): `local` is the in-process
    LocalEngine; `vllm` a vLLM OpenAI-compatible server (arcforge.rollout.vllm_engine), started
    from the vLLM virtualenv (`make setup-vllm`) or, with `url`, one already running."""

    kind: Literal["local", "vllm"] = "local"
    url: str | None = None  # vllm: a running dev-mode server holding the policy's weights
    python: str | None = None  # vllm: interpreter with vLLM; default .venv-vllm/bin/python
    workdir: str | None = None  # vllm: checkpoints pushed to the server and its log
    kv_cache_gib: int = Field(1, gt=0)  # vllm: CPU KV cache size in GiB
    max_model_len: int | None = Field(None, gt=0)  # vllm: default the model's positions
    startup_timeout: float = Field(900.0, gt=0)  # vllm: seconds until the server is healthy
    extra_args: list[str] = []  # vllm: more api_server arguments


class StageCfg(Strict):
    name: str
    kind: str
    init: str | None = None  # stage whose checkpoint to start from; default: the previous one
    seed: int = 0
    checkpoint_every: int = Field(50, gt=0)
    log_every: int = Field(10, gt=0)
    eval: bool = True  # evaluate this stage's checkpoint in the capability matrix
    eval_skip: list[str] = []  # suites of eval.suites not run on this stage (e.g. agent suites
    # on a checkpoint that has never seen a tool call); blank cells in the matrix


class LMStageCfg(StageCfg):
    """Pretraining / mid-training: packed next-token prediction."""

    kind: Literal["pretrain", "midtrain"]
    sources: list[SourceCfg]
    seq_len: int = Field(128, gt=8)
    tokens_per_batch: int = Field(4096, gt=0)
    tokens: int = Field(2_000_000, gt=0)  # total tokens when no context_schedule is given
    context_schedule: list[ContextStageCfg] = []
    optim: OptimCfg = OptimCfg()
    # "bf16": forward/backward under bf16 autocast (weights, gradients and optimizer stay
    # fp32), for GPUs; not bit-identical to fp32. On CPUs without native bf16 it is much
    # slower (measured on the 2-core dev machine: 3.4 s/step vs 0.24 s/step in fp32)
    precision: Literal["fp32", "bf16"] = "fp32"
    curate: bool = True
    # synthetic copy rows (arcforge/data/copy_rows.py): a first phase of `copy_warmup_steps`
    # steps made only of them (added to `tokens`), then this fraction of every batch (within it)
    copy_warmup_steps: int = Field(0, ge=0)
    copy_rows: float = Field(0.0, ge=0.0, lt=1.0)
    heldout_every: int = Field(50, gt=0)
    heldout_docs: int = Field(64, gt=0)

    @field_validator("context_schedule")
    @classmethod
    def _non_decreasing(cls, v: list[ContextStageCfg]) -> list[ContextStageCfg]:
        for a, b in zip(v, v[1:]):
            if b.seq_len < a.seq_len:
                raise ValueError("context_schedule seq_len must not decrease")
        return v


class SFTStageCfg(StageCfg):
    """Supervised fine-tuning on message lists with the chat template's loss mask."""

    kind: Literal["sft"]
    sources: list[SourceCfg]
    max_len: int = Field(512, gt=8)
    batch_size: int = Field(16, gt=0)
    epochs: float = Field(3.0, gt=0)
    optim: OptimCfg = OptimCfg(lr=1e-3, warmup_steps=10)
    precision: Literal["fp32", "bf16"] = "fp32"  # as in LMStageCfg
    preserve_thinking: bool = False


class EvalCfg(Strict):
    suites: list[str] = ["lm_loss", "reasoning", "tool_format", "long_context", "chat"]
    n: int = Field(100, gt=0)  # held-out tasks per suite
    n_per_suite: dict[str, int] = {}  # overrides of n (e.g. fewer for sandboxed suites)
    max_turns: int = Field(6, gt=0)  # agent turns in environment suites
    max_new_tokens: int = Field(96, gt=0)
    batch_size: int = Field(64, gt=0)
    seed: int = 1234
    # The `reasoning` suite samples k replies per task at this temperature (avg@k, seeded by
    # `seed`), as reasoning models are evaluated; `reasoning_greedy` decodes greedily.
    temperature: float = Field(0.7, ge=0.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    samples: int = Field(4, gt=0)

    def n_for(self, suite: str) -> int:
        """How many held-out tasks `suite` evaluates: `n_per_suite[suite]`, else `n`."""
        return self.n_per_suite.get(suite, self.n)


STAGE_CONFIGS: dict[str, type[StageCfg]] = {
    "pretrain": LMStageCfg,
    "midtrain": LMStageCfg,
    "sft": SFTStageCfg,
}


class RunCfg(Strict):
    name: str = "run"
    seed: int = 0
    run_dir: str | None = None
    device: str = "cpu"  # cpu, cuda, cuda:N, mps or auto (arcforge.device)
    world: WorldCfg = WorldCfg()
    tokenizer: TokenizerCfg = TokenizerCfg()
    model: ModelCfg = ModelCfg()
    stages: list[Any] = []
    eval: EvalCfg = EvalCfg()

    def stage(self, name: str) -> StageCfg:
        for s in self.stages:
            if s.name == name:
                return s
        raise ConfigError(f"no stage named {name!r}; stages: {[s.name for s in self.stages]}")


def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _explain(err: ValidationError, where: str, prefix: str = "") -> ConfigError:
    e = err.errors()[0]
    key = _loc(tuple(x for x in e["loc"] if not str(x).startswith("function-")))
    key = f"{prefix}.{key}" if prefix and key else (prefix or key)
    if e["type"] == "extra_forbidden":
        return ConfigError(f"{where}: unknown key '{key}'")
    if e["type"] == "missing":
        return ConfigError(f"{where}: missing required key '{key}'")
    got = e.get("input")
    got_s = f" (got {got!r})" if not isinstance(got, dict | list) else ""
    return ConfigError(f"{where}: key '{key}': {e['msg']}{got_s}")


def _parse_stages(raw: list[Any], where: str) -> list[StageCfg]:
    if not isinstance(raw, list):
        raise ConfigError(f"{where}: key 'stages' must be a list")
    out: list[StageCfg] = []
    for i, s in enumerate(raw):
        if not isinstance(s, dict) or "kind" not in s:
            raise ConfigError(f"{where}: key 'stages[{i}]' needs a 'kind'")
        cls = STAGE_CONFIGS.get(s["kind"])
        if cls is None:
            raise ConfigError(
                f"{where}: key 'stages[{i}].kind': unknown stage kind {s['kind']!r}; "
                f"known: {sorted(STAGE_CONFIGS)}"
            )
        try:
            out.append(cls.model_validate(s))
        except ValidationError as err:
            raise _explain(err, where, f"stages[{i}]") from None
    names = [s.name for s in out]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ConfigError(f"{where}: duplicate stage name(s) {sorted(dup)}")
    for i, s in enumerate(out):
        if s.init is not None and s.init not in names[:i]:
            raise ConfigError(
                f"{where}: key 'stages[{i}].init': {s.init!r} is not an earlier stage"
            )
    return out


def parse_config(raw: dict[str, Any], where: str = "<config>") -> RunCfg:
    import arcforge.stages  # noqa: F401  (each stage module registers its config class)

    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: the top level must be a mapping")
    raw = dict(raw)
    stages = raw.pop("stages", [])
    try:
        cfg = RunCfg.model_validate(raw)
    except ValidationError as err:
        raise _explain(err, where) from None
    cfg.stages = _parse_stages(stages, where)
    for i, st in enumerate(cfg.stages):
        extra = [x for x in st.eval_skip if x not in cfg.eval.suites]
        if extra:
            raise ConfigError(f"{where}: key 'stages[{i}].eval_skip': {extra} not in eval.suites")
    return cfg


def _set_path(raw: dict[str, Any], path: str, value: Any, where: str) -> None:
    parts = path.split(".")
    node: Any = raw
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if isinstance(node, list):
            idx = next(
                (j for j, s in enumerate(node) if isinstance(s, dict) and s.get("name") == part),
                None,
            )
            if idx is None and part.isdigit() and int(part) < len(node):
                idx = int(part)
            if idx is None:
                raise ConfigError(f"{where}: override '{path}': no list item '{part}'")
            if last:
                node[idx] = value
            node = node[idx]
            continue
        if not isinstance(node, dict):
            raise ConfigError(f"{where}: override '{path}': '{part}' is inside a scalar")
        if last:
            node[part] = value
        else:
            node = node.setdefault(part, {})


def apply_overrides(raw: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply `a.b=value` overrides (value parsed as YAML) to a raw config dict in place."""
    for ov in overrides:
        if "=" not in ov:
            raise ConfigError(f"command line: override '{ov}' must look like a.b=value")
        key, val = ov.split("=", 1)
        try:
            value = yaml.safe_load(val) if val != "" else ""
        except yaml.YAMLError:
            value = val
        _set_path(raw, key.strip(), value, "command line")
    return raw


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> RunCfg:
    """Read a YAML run config, apply overrides, validate. Errors name the key and the file."""
    path = Path(path) if path else DEFAULT_CONFIG
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark else ""
        raise ConfigError(
            f"{path}:{line} is not valid YAML: {getattr(err, 'problem', err)}"
        ) from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the top level must be a mapping")
    apply_overrides(raw, overrides or [])
    where = f"{path}" + (" (with overrides)" if overrides else "")
    return parse_config(raw, where)


def dump_config(cfg: RunCfg) -> str:
    d = cfg.model_dump(mode="json")
    d["stages"] = [s.model_dump(mode="json") for s in cfg.stages]
    return yaml.safe_dump(d, sort_keys=False)
