"""The config pieces every layer shares: world, tokenizer, model, optimizer, engine, loss, eval.

A run config names the world, the tokenizer, the model and an ordered list of stages. This module
holds what every stage and every lower layer reads: the base of a stage (`StageCfg`), the policy
loss the RL-type stages share (`LossCfg`), the run's settings apart from its stages
(`BaseRunCfg`), and the YAML plumbing (reading a file, `a.b=value` overrides, error messages that
name the key and the file). Each stage kind's own model lives with its runner in
`arcforge/stages/<kind>.py`; `arcforge.run_config.RunCfg` puts them together as a discriminated
union on `kind`, above the stages, so this module imports none of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

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
from arcforge.metrics import LoggingCfg

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


class ChatCfg(Strict):
    """How conversations become tokens (arcforge.chat.formats).

    format: "native" renders through the checkpoint's own chat template and tool-call dialect
    (no token added, no embedding resized); "arcforge" is the format of models arcforge
    pretrains; "auto" (the default) is native for a `model.path` checkpoint whose template is
    not arcforge's, and arcforge otherwise.
    """

    format: Literal["auto", "native", "arcforge"] = "auto"
    # passed to the template on every render (e.g. {enable_thinking: false})
    template_kwargs: dict[str, Any] = {}
    # the tool-call dialect (arcforge.chat.dialects.DIALECTS); null: detected from the template
    dialect: str | None = None

    @model_validator(mode="after")
    def _known_dialect(self) -> ChatCfg:
        from arcforge.chat.dialects import DIALECTS

        if self.dialect is not None and self.dialect not in DIALECTS:
            raise ValueError(f"unknown chat.dialect {self.dialect!r}; known: {sorted(DIALECTS)}")
        return self


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
    # aux-loss-free MoE balancing (arcforge.model.moe.AuxFreeBalancer): after each step every
    # router's expert bias moves by gamma toward under-loaded experts; 0 = off (no-op for
    # models without routers)
    moe_bias_gamma: float = Field(0.0, ge=0)


class LoraCfg(Strict):
    """LoRA adapters on a training stage (arcforge.train.lora, PyPI's peft): only the adapters
    train; the stage's checkpoint and every weight push are the merged model. Null (a stage's
    default) is full fine-tuning."""

    r: int = Field(8, gt=0)  # the adapters' rank
    alpha: float = Field(16.0, gt=0)  # the update is scaled by alpha / r
    dropout: float = Field(0.0, ge=0, lt=1)  # on the adapters' input
    # module names (the last part, e.g. q_proj) or "all-linear" (every linear layer but the head)
    target_modules: list[str] | Literal["all-linear"] = ["q_proj", "k_proj", "v_proj", "o_proj"]
    save_adapter: bool = True  # also write peft's adapter in the checkpoint's adapter/

    @field_validator("target_modules")
    @classmethod
    def _some_targets(cls, v: list[str] | str) -> list[str] | str:
        if isinstance(v, list) and (not v or not all(t.strip() for t in v)):
            raise ValueError('name at least one module (e.g. [q_proj, v_proj]) or "all-linear"')
        return v


class EngineCfg(Strict):
    """The rollout engine (arcforge.rollout.engines.factory.make_engine): `local` is the
    in-process LocalEngine; `vllm` a vLLM OpenAI-compatible server (arcforge.rollout.engines.vllm),
    started from the vLLM virtualenv (`make setup-vllm`) or, with `url`, one already running;
    `sglang` an SGLang server through its native /generate (arcforge.rollout.engines.sglang)."""

    # local: in-process; vllm: a vLLM server; sglang: an SGLang server
    kind: Literal["local", "vllm", "sglang"] = "local"
    # server kinds (vllm, sglang) only:
    url: str | None = None  # a running server holding the policy's weights (vllm: dev mode)
    # interpreter with the engine; default .venv-vllm/bin/python or .venv-sglang/bin/python
    python: str | None = None
    workdir: str | None = None  # checkpoints pushed to the server and its log
    kv_cache_gib: int = Field(1, gt=0)  # vllm: CPU KV cache size in GiB
    max_model_len: int | None = Field(None, gt=0)  # default the model's positions
    startup_timeout: float = Field(900.0, gt=0)  # seconds until the server is healthy
    extra_args: list[str] = []  # more server arguments


class StageCfg(Strict):
    """What every stage has; each kind's model (arcforge/stages/<kind>.py) adds its own keys."""

    name: str
    kind: str
    init: str | None = None  # stage whose checkpoint to start from; default: the previous one
    seed: int = 0
    checkpoint_every: int = Field(50, gt=0)
    log_every: int = Field(10, gt=0)
    eval: bool = True  # evaluate this stage's checkpoint in the capability matrix
    eval_skip: list[str] = []  # suites of eval.suites not run on this stage (e.g. agent suites
    # on a checkpoint that has never seen a tool call); blank cells in the matrix


class LossCfg(Strict):
    """The clipped policy-gradient loss the RL-type stages share (`arcforge.rl.losses`, applied
    by `arcforge.train.rl.policy_backward` over micro-batches)."""

    # grpo_icepop: PPO clip against the trainer's recomputed old logprobs, times IcePop's pop;
    # double_sided_is: importance sampling against the rollout logprobs, tokens outside
    # [1 - clip_low, 1 + clip_high] masked (the asynchronous and distillation trainers' only one)
    loss: Literal["grpo_icepop", "double_sided_is"] = "grpo_icepop"
    # token_mean: every trained token of the batch weighs the same (long episodes weigh more);
    # seq_mean: every trajectory weighs the same, its tokens averaged within it (verl's
    # "seq-mean-token-mean"), so many long failures cannot outweigh a few short successes.
    loss_agg: Literal["token_mean", "seq_mean"] = "token_mean"
    # eps_l: the ratio's trust region is [1 - eps_l, 1 + eps_h], clipped by grpo_icepop,
    # tokens outside it masked by double_sided_is
    clip_low: float = Field(0.2, ge=0, lt=1)
    clip_high: float = Field(0.28, ge=0)  # eps_h (above eps_l: DAPO's clip-higher)
    # grpo_icepop only: pop tokens whose train/inference ratio rho leaves [1/beta, beta];
    # None: no mismatch correction (rho := 1)
    icepop_beta: float | None = Field(2.0, gt=1)
    # k3 KL to the frozen starting policy; only the synchronous trainer keeps that reference
    kl_coef: float = Field(0.0, ge=0)
    micro_batch: int = Field(32, gt=0)  # sequences per forward/backward


def no_reference_kl(cfg: LossCfg, trainer: str) -> LossCfg:
    """Validator body for stages whose trainer keeps no reference policy: kl_coef must be 0."""
    if cfg.kl_coef:
        raise ValueError(f"kl_coef: {trainer} keeps no reference policy; leave it at 0")
    return cfg


class OnPolicyStageCfg(LossCfg, StageCfg):
    """What the stages that train on their own rollouts share (rl, general_rl, distill,
    agentic_rl): the loss fields (`LossCfg`), the reply length, the optimizer's defaults and the
    rollout engine."""

    max_new_tokens: int = Field(96, gt=0)
    optim: OptimCfg = OptimCfg(lr=1e-4, warmup_steps=0, min_lr_ratio=1.0, weight_decay=0.0)
    # the rollout engine (arcforge.rollout.engines.factory.make_engine)
    engine: EngineCfg = EngineCfg()
    engine_precision: Literal["fp32", "bf16", "int8"] = "fp32"
    lora: LoraCfg | None = None  # LoRA adapters (arcforge.train.lora); null: full fine-tuning


class RolloutISStageCfg(OnPolicyStageCfg):
    """An on-policy stage whose trainer recomputes no old-policy logprobs and keeps no reference
    policy (distill, agentic_rl): double_sided_is against the rollout logprobs, kl_coef 0.
    Subclasses name their trainer in `trainer` (for the kl_coef error)."""

    trainer: ClassVar[str] = "this trainer"
    loss: Literal["double_sided_is"] = "double_sided_is"
    temperature: float = Field(1.0, gt=0)

    @model_validator(mode="after")
    def _no_reference_kl(self) -> RolloutISStageCfg:
        return no_reference_kl(self, self.trainer)


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
    # the evaluation engine's numerics: bf16 decodes a real checkpoint 2-3x faster on CPU
    precision: Literal["fp32", "bf16"] = "fp32"
    # a run from a real checkpoint (`model.path`) also scores that checkpoint as stage `base`
    base: bool = True

    def n_for(self, suite: str) -> int:
        """How many held-out tasks `suite` evaluates: `n_per_suite[suite]`, else `n`."""
        return self.n_per_suite.get(suite, self.n)


class BaseRunCfg(Strict):
    """A run's settings apart from its stages' own models: what the lower layers (the run
    context, the world, the evaluation) read. `arcforge.run_config.RunCfg` adds `stages` as the
    union of every stage kind's model."""

    name: str = "run"
    # added to every stage's `seed` (data draws, batch order, sampling): `seed=1` reruns the
    # whole recipe on another draw; the world and the eval items stay the same
    seed: int = 0
    run_dir: str | None = None
    device: str = "cpu"  # cpu, cuda, cuda:N, mps or auto (arcforge.device)
    world: WorldCfg = WorldCfg()
    tokenizer: TokenizerCfg = TokenizerCfg()
    model: ModelCfg = ModelCfg()
    chat: ChatCfg = ChatCfg()
    stages: Sequence[StageCfg] = []
    eval: EvalCfg = EvalCfg()
    logging: LoggingCfg = LoggingCfg()  # metric sinks of the LM and SFT stages

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


def explain(err: ValidationError, where: str, prefix: str = "") -> ConfigError:
    """One line for a validation error: the file (`where`), the key and what is wrong."""
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


def check_stages(stages: Sequence[StageCfg], eval_suites: list[str], where: str) -> None:
    """Cross-stage rules: unique names, `init` naming an earlier stage, `eval_skip` in the
    run's eval suites."""
    names = [s.name for s in stages]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ConfigError(f"{where}: duplicate stage name(s) {sorted(dup)}")
    for i, s in enumerate(stages):
        if s.init is not None and s.init not in names[:i]:
            raise ConfigError(
                f"{where}: key 'stages[{i}].init': {s.init!r} is not an earlier stage"
            )
        extra = [x for x in s.eval_skip if x not in eval_suites]
        if extra:
            raise ConfigError(f"{where}: key 'stages[{i}].eval_skip': {extra} not in eval.suites")


def read_yaml(path: str | Path | None, overrides: list[str] | None = None) -> tuple[dict, str]:
    """A YAML run config as a raw dict with `overrides` applied, and how errors name it."""
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
    return raw, f"{path}" + (" (with overrides)" if overrides else "")
