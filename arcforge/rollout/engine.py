"""Inference engines: token ids in, sampled token ids and their logprobs out.

`Engine` is the protocol the agent loop and the RL loops speak. Two implementations:

- `LocalEngine`: in-process PyTorch. Batched sampling over a left-padded batch with a
  preallocated KV cache. For Llama-family models (llama, qwen2, qwen3) it runs its own lean
  decode step over the model's weights (q/k/v and gate/up fused, SDPA attention, no mask
  building or logits processors per step); any other causal LM runs through the model's own
  forward with a `DynamicCache`. The engine owns a private copy of the weights, so training the
  trainer's model changes nothing until `load_weights`. `precision` makes the copy bf16 or int8
  so that the train/inference mismatch IcePop guards against is real. With an `mtp` head it
  decodes speculatively, one row at a time (arcforge.rollout.spec_decode): the tokens and
  logprobs are distributed exactly as the target model's.
  With `record_routing` (an MoE model: transformers' `glm_moe_dsa`) each completion carries
  the experts every router picked in the forwards that generated it, for routing replay in
  training (arcforge.model.moe).
- `ServerEngine`: any OpenAI-compatible `/v1/completions` server that takes prompt token ids and
  returns completion token ids and logprobs (vLLM, SGLang, `arcforge serve`).

`make_engine` builds the one a config names: `local`, `vllm` (arcforge.rollout.vllm_engine) or
`sglang` (arcforge.rollout.sglang_engine, SGLang's native `/generate`).

Logprob convention (both engines): the logprob of each sampled token is log_softmax of the raw
model logits at temperature 1, before temperature / top-k / top-p. That is the policy logprob
the trainer recomputes, and it is what vLLM returns by default (raw logprobs). At T=1 without
top-k/top-p it is also the sampling distribution's logprob. With
`SamplingParams.tempered_logprobs` (LocalEngine only) it is log_softmax(logits / T), the
logprob of the tempered policy that sampled the token (before top-k/top-p); a trainer that
divides its logits by the same T then takes the policy gradient of the distribution it sampled
from (verl and slime divide by the rollout temperature), where raw logprobs give the gradient
of the T=1 policy on samples of another.

Deliberate simplifications: int8 is *simulated* W8A8 dynamic quantization (per-output-channel
int8 weights, per-token int8 activations, integer products accumulated in fp32): the numerics
of an int8 kernel, not its speed. `torch.ao.quantization.quantize_dynamic` still exists in
torch 2.13 but its quantized dtypes are deprecated, and torchao is not a dependency.
Generation stops only at `stop_token_ids` (pass the EOS id there; vLLM also stops at EOS).
"""

from __future__ import annotations

import copy
import math
from contextlib import nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

import httpx
import torch
from torch import nn

from arcforge.errors import ConfigError
from arcforge.rollout.decoder import _fast_supported, _FastDecoder, _HFDecoder, _quantize_int8

if TYPE_CHECKING:  # the MTP and MoE modules load transformers' GLM-5 code: only when used
    from arcforge.config import EngineCfg
    from arcforge.model.moe import RoutingRecord
    from arcforge.model.mtp import MTPHead
    from arcforge.rollout.spec_decode import SpecStats

FinishReason = Literal["stop", "length"]
PRECISIONS = ("fp32", "bf16", "int8")


@dataclass(frozen=True)
class SamplingParams:
    """How to sample. temperature 0 is greedy; top_k 0 and top_p 1 are off.

    With a `seed`, row r of a call (r = prompt_index * n + sample_index) samples from its own
    generator seeded `seed + r`, so its tokens do not depend on the rest of the batch.
    """

    max_new_tokens: int = 64
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    stop_token_ids: tuple[int, ...] = ()
    seed: int | None = None
    n: int = 1
    tempered_logprobs: bool = False  # logprobs under logits / temperature (see the header)

    def __post_init__(self) -> None:
        object.__setattr__(self, "stop_token_ids", tuple(int(t) for t in self.stop_token_ids))
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0 or self.n < 1:
            raise ValueError(f"top_k must be >= 0 and n >= 1, got {self.top_k}, {self.n}")


@dataclass
class Completion:
    """One sampled continuation. A stop token, when hit, is the last entry of token_ids."""

    token_ids: list[int]
    logprobs: list[float]  # raw-logit logprob of each token in token_ids (see module docstring)
    finish_reason: FinishReason
    version: int | None = None  # the weight version that sampled it, when the engine knows
    # with a LocalEngine that records routing: per MoE router (layer order), the (L - 1, k)
    # experts it picked for the prompt and every sampled token but the last (the L - 1 inputs
    # of the trainer's teacher-forced forward over prompt + completion); None otherwise
    routing: list[torch.Tensor] | None = None


@runtime_checkable
class Engine(Protocol):
    """Returns completions ordered prompt by prompt, the n samples of a prompt adjacent."""

    @property
    def version(self) -> int: ...

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]: ...

    def load_weights(self, state_dict: dict[str, torch.Tensor], version: int) -> None: ...


# ---------------------------------------------------------------- precision


def _sample(logits: torch.Tensor, p: SamplingParams, gens: list[torch.Generator] | None):
    """logits (B, V) fp32 raw -> tokens (B,), logprobs (B,) under log_softmax(logits), or
    log_softmax(logits / T) with p.tempered_logprobs and T > 0."""
    tempered = p.tempered_logprobs and p.temperature > 0
    logp = torch.log_softmax(logits / p.temperature if tempered else logits, dim=-1)  # (B, V)
    if p.temperature == 0:
        tok = logits.argmax(dim=-1)
    else:
        z = logits / p.temperature  # (B, V)
        if 0 < p.top_k < z.shape[-1]:
            kth = torch.topk(z, p.top_k, dim=-1).values[:, -1:]  # (B, 1)
            z = z.masked_fill(z < kth, -math.inf)
        if p.top_p < 1.0:
            zs, idx = z.sort(dim=-1, descending=True)  # (B, V)
            ps = zs.softmax(dim=-1)
            drop_sorted = ps.cumsum(dim=-1) - ps > p.top_p  # mass before this token > top_p
            z = z.masked_fill(
                torch.zeros_like(drop_sorted).scatter(-1, idx, drop_sorted), -math.inf
            )
        cdf = z.softmax(dim=-1).cumsum(dim=-1)  # (B, V)
        if gens is None:
            u = torch.rand(cdf.shape[0], 1, device=cdf.device)  # (B, 1)
        else:
            u = torch.cat([torch.rand(1, 1, generator=g, device=cdf.device) for g in gens])
        # Inverse-CDF sampling: one uniform per row (B×V exponentials would cost more than
        # the decode step's matmuls on a CPU). 1-u is in (0, 1], so zero-probability tokens
        # (flat spots of the cdf) are never picked.
        x = (1.0 - u) * cdf[:, -1:]  # (B, 1)
        tok = torch.searchsorted(cdf, x).squeeze(1).clamp(max=cdf.shape[-1] - 1)  # (B,)
    return tok, logp.gather(-1, tok[:, None]).squeeze(-1)


# ---------------------------------------------------------------- engines


class LocalEngine:
    """In-process batched sampler over a private copy of `model` (see module docstring).

    Args:
        model: a transformers causal LM; it is deep-copied, the caller's model is not touched.
        pad_token_id: id used for left padding (never attended to).
        precision: "fp32", "bf16" (weights, activations and KV cache in bf16) or "int8".
        max_batch: rows per forward; larger calls are processed in chunks (shortest prompts first).
        fast: use the lean Llama-family decode path when the architecture allows it.
        mtp: an MTP head of `model`: speculative decoding with its drafts (the HF forward path).
        draft_steps: drafts per speculative round (0: the head's trained depth).
        record_routing: carry each completion's MoE routing on `Completion.routing` (the RL
            stages' `routing_replay`); needs a model with MoE routers and no `mtp`.
    """

    def __init__(
        self,
        model: nn.Module,
        *,
        pad_token_id: int,
        precision: str = "fp32",
        max_batch: int = 64,
        fast: bool = True,
        mtp: MTPHead | None = None,
        draft_steps: int = 0,
        record_routing: bool = False,
    ) -> None:
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
        if record_routing:
            _check_routing_recordable(model, mtp)
        self.records_routing = record_routing
        self.pad_token_id, self.precision, self.max_batch = pad_token_id, precision, max_batch
        self._master = copy.deepcopy(model).eval().requires_grad_(False)
        self._fast = fast and mtp is None and _fast_supported(self._master)
        self._mtp, self._draft_steps = mtp, draft_steps
        self._version = 0
        self._build()

    @property
    def version(self) -> int:
        return self._version

    @property
    def spec_stats(self) -> SpecStats | None:
        """Speculative decoding's counts since the weights were last loaded (None: off)."""
        return None if self._spec is None else self._spec.stats

    def _build(self) -> None:
        m = copy.deepcopy(self._master)
        dec: nn.Module = _FastDecoder(m) if self._fast else _HFDecoder(m)
        if self.precision == "bf16":
            dec = dec.to(torch.bfloat16)
        elif self.precision == "int8":
            _quantize_int8(dec)
        self._dec = dec.eval()
        self._spec = None
        if self._mtp is not None:  # _HFDecoder: dec.model is the HF model at this precision
            from arcforge.rollout.spec_decode import SpecDecoder

            self._spec = SpecDecoder(dec.model, self._mtp, self.precision, self._draft_steps)
        self._device = next(self._master.parameters()).device

    def load_weights(self, state_dict: dict[str, torch.Tensor], version: int) -> None:
        """Replace the engine's weights (strict key match) and set the policy version."""
        self._master.load_state_dict(state_dict)
        self._build()
        self._version = version

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        if any(len(p) == 0 for p in prompts):
            raise ValueError("every prompt needs at least one token")
        if self._spec is not None:
            with torch.inference_mode():
                rows = self._spec.generate(prompts, params)
            return [Completion(t, lp, f) for t, lp, f in rows]  # type: ignore[arg-type]
        rows = [i for i in range(len(prompts)) for _ in range(params.n)]  # row r -> prompt
        order = sorted(range(len(rows)), key=lambda r: len(prompts[rows[r]]))
        out: list[Completion | None] = [None] * len(rows)
        with torch.inference_mode():
            for s in range(0, len(order), self.max_batch):
                chunk = order[s : s + self.max_batch]
                done = self._generate_batch([prompts[rows[r]] for r in chunk], chunk, params)
                for r, c in zip(chunk, done):
                    out[r] = c
        return out  # type: ignore[return-value]

    def _generate_batch(self, prompts, row_ids, p: SamplingParams) -> list[Completion]:
        B, P = len(prompts), max(map(len, prompts))
        ids = torch.full((B, P), self.pad_token_id, dtype=torch.long)  # (B, P) left-padded
        mask = torch.zeros(B, P, dtype=torch.long)
        for b, prompt in enumerate(prompts):
            ids[b, P - len(prompt) :], mask[b, P - len(prompt) :] = torch.tensor(prompt), 1
        recording = nullcontext(None)
        if self.records_routing:  # hooks on the decoder's routers: the forwards that sample
            from arcforge.model.moe import record_routing

            recording = record_routing(self._dec)
        with recording as record:
            toks, lps, length, stopped, steps_alive = self._decode(ids, mask, row_ids, p, record)
        routing: list[list[torch.Tensor] | None] = [None] * B
        if record is not None:
            lens = [len(prompt) for prompt in prompts]
            routing[:] = _completion_routing(record, lens, P, steps_alive, length.tolist())
        toks_l, lps_l = toks.tolist(), lps.tolist()
        return [
            Completion(
                toks_l[b][: length[b]],
                lps_l[b][: length[b]],
                "stop" if stopped[b] else "length",
                routing=routing[b],
            )
            for b in range(B)
        ]

    def _decode(self, ids, mask, row_ids, p: SamplingParams, record: RoutingRecord | None):
        """Prefill the left-padded (B, P) `ids` and sample up to p.max_new_tokens per row.

        Returns:
            tokens (B, N), logprobs (B, N), length (B,), stopped (B,), and with a routing
            `record` the rows each decode step ran (one (b_t,) tensor per step, else []).
        """
        (B, P), N, dev = ids.shape, p.max_new_tokens, self._device
        logits = self._dec.prefill(ids.to(dev), mask.to(dev), P + N)  # (B, V)
        steps_alive: list[torch.Tensor] = []
        gens = None
        if p.seed is not None:
            gens = [torch.Generator(device=dev).manual_seed(p.seed + r) for r in row_ids]
        stop = torch.tensor(p.stop_token_ids, device=dev) if p.stop_token_ids else None
        toks = torch.full((B, N), self.pad_token_id, dtype=torch.long, device=dev)
        lps = torch.zeros(B, N, device=dev)  # (B, N)
        length = torch.full((B,), N, dtype=torch.long)  # (B,)
        stopped = torch.zeros(B, dtype=torch.bool)
        alive = torch.arange(B, device=dev)  # decoder row -> batch row
        done = torch.zeros(B, dtype=torch.bool, device=dev)  # per decoder row
        for t in range(N):
            tok, lp = _sample(logits, p, gens)  # (b,), (b,)
            toks[alive, t], lps[alive, t] = tok, lp
            if stop is not None:
                hit = torch.isin(tok, stop) & ~done
                if hit.any():
                    length[alive[hit].cpu()], stopped[alive[hit].cpu()] = t + 1, True
                    done |= hit
                    if done.all():
                        break
                    if int(done.sum()) > len(done) // 8:  # drop finished rows from the batch
                        keep = (~done).nonzero().squeeze(1)
                        self._dec.keep(keep)
                        alive, tok, done = alive[keep], tok[keep], done[keep]
                        gens = None if gens is None else [gens[k] for k in keep.tolist()]
            if t + 1 < N:
                if record is not None:
                    steps_alive.append(alive.cpu())
                logits = self._dec.step(tok)
        return toks, lps, length, stopped, steps_alive


def _check_routing_recordable(model: nn.Module, mtp: MTPHead | None) -> None:
    """Raise unless the LocalEngine can record `model`'s routing (see `record_routing`)."""
    from arcforge.model.moe import routers

    if mtp is not None:
        raise ValueError(
            "routing_replay records the experts of the plain decode loop; speculative decoding "
            "(an mtp head) is not supported with it: turn one of them off"
        )
    if not routers(model):
        kind = getattr(getattr(model, "config", None), "model_type", type(model).__name__)
        raise ValueError(
            f"routing_replay needs a model with MoE routers (a glm5-* preset); {kind} has none"
        )


def _completion_routing(
    record: RoutingRecord,
    prompt_lens: list[int],
    width: int,
    steps_alive: list[torch.Tensor],
    lengths: list[int],
) -> list[list[torch.Tensor]]:
    """Each row's experts per router over the tokens the trainer's forward routes: its prompt
    (the prefill, left padding cut) then every sampled token but the last (the decode steps
    that fed them).

    Args:
        record: router i's forwards are `record.experts[i]`: the prefill's (B * width, k),
            then one (b_t, k) per decode step t, over the rows `steps_alive[t]`.
        prompt_lens: each row's prompt length (<= width, the padded prompt width).
        lengths: each row's completion length.
    Returns:
        `out[b][i]`: row b's (prompt_lens[b] + lengths[b] - 1, k) int64 experts of router i.
    """
    B, out = len(prompt_lens), [[] for _ in prompt_lens]
    with torch.inference_mode(False):  # plain tensors: a training forward saves them for backward
        for calls in record.experts:
            if len(calls) != 1 + len(steps_alive):
                raise RuntimeError(
                    f"routing record: {len(calls)} forwards for 1 prefill and "
                    f"{len(steps_alive)} decode steps"
                )
            prefill = calls[0].cpu().clone().view(B, width, -1)  # (B, width, k)
            steps = torch.full((len(steps_alive), B, prefill.shape[-1]), -1, dtype=torch.long)
            for t, (rows, experts) in enumerate(zip(steps_alive, calls[1:])):
                steps[t, rows] = experts.cpu().clone().long()  # (b_t, k) of decoder rows
            for b in range(B):
                prompt = prefill[b, width - prompt_lens[b] :]  # (prompt_len, k)
                out[b].append(torch.cat([prompt.long(), steps[: lengths[b] - 1, b]]))
    return out


class ServerEngine:
    """Client for an OpenAI-compatible `POST {base_url}/v1/completions` (vLLM shape).

    Request fields: model, prompt (list of token-id lists), max_tokens, temperature, top_p,
    top_k (-1 = off), n, seed, stop_token_ids, logprobs=0, return_tokens_as_token_ids=true,
    skip_special_tokens=false. Response: choices[i] with index (= prompt * n + sample),
    finish_reason, logprobs.token_logprobs and logprobs.tokens ("token_id:<id>"); a
    choices[i].token_ids list, when present, is used for the ids instead.

    `load_weights` needs a server with `POST /update_weights {"path", "version"}` (arcforge
    serve has it) and a `weight_sync_dir` both processes can read.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = 600.0,
        weight_sync_dir: str | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.base_url, self.model, self.weight_sync_dir = (
            base_url.rstrip("/"),
            model,
            weight_sync_dir,
        )
        self._client = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout)
        self._version = 0

    @property
    def version(self) -> int:
        return self._version

    def _post(self, route: str, body: dict[str, Any]) -> dict[str, Any]:
        r = self._client.post(route, json=body)
        if r.status_code == 404 and route == "/update_weights":
            raise NotImplementedError(f"{self.base_url} has no /update_weights route")
        if r.status_code != 200:
            raise RuntimeError(f"{self.base_url}{route} answered {r.status_code}: {r.text[:500]}")
        return r.json()

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        if params.tempered_logprobs:
            raise ValueError(
                f"{self.base_url}: tempered_logprobs needs the LocalEngine; a "
                "server returns raw logprobs (vLLM's default logprobs mode)"
            )
        if not prompts:
            return []
        body = completions_request(self.model, prompts, params)
        choices = sorted(self._post("/v1/completions", body)["choices"], key=lambda c: c["index"])
        if len(choices) != len(prompts) * params.n:
            raise RuntimeError(
                f"{self.base_url} returned {len(choices)} choices, "
                f"expected {len(prompts) * params.n}"
            )
        return [_parse_choice(c) for c in choices]

    def load_weights(self, state_dict: dict[str, torch.Tensor], version: int) -> None:
        if self.weight_sync_dir is None:
            raise NotImplementedError(
                "ServerEngine.load_weights needs weight_sync_dir and a server with "
                "POST /update_weights (arcforge serve); for vLLM/SGLang use their own weight "
                "update mechanism or restart the server on a new checkpoint"
            )
        from pathlib import Path

        from safetensors.torch import save_file

        path = Path(self.weight_sync_dir) / f"weights_v{version}.safetensors"
        path.parent.mkdir(parents=True, exist_ok=True)
        save_file({k: v.detach().cpu().contiguous() for k, v in state_dict.items()}, str(path))
        self._post("/update_weights", {"path": str(path), "version": version})
        self._version = version


def completions_request(model: str, prompts: list[list[int]], params: SamplingParams) -> dict:
    """The `/v1/completions` body for token-id prompts that returns token ids and raw logprobs
    (vLLM's and `arcforge serve`'s extensions of the OpenAI schema)."""
    return {
        "model": model,
        "prompt": [list(map(int, p)) for p in prompts],
        "max_tokens": params.max_new_tokens,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "top_k": params.top_k if params.top_k > 0 else -1,
        "n": params.n,
        "seed": params.seed,
        "stop_token_ids": list(params.stop_token_ids),
        "logprobs": 0,
        "return_tokens_as_token_ids": True,
        "skip_special_tokens": False,
    }


def _parse_choice(c: dict[str, Any]) -> Completion:
    lp = c.get("logprobs") or {}
    ids = c.get("token_ids")
    if ids is None:
        tokens = lp.get("tokens") or []
        if any(not str(t).startswith("token_id:") for t in tokens):
            raise RuntimeError(
                "server did not return token ids: ask for "
                "return_tokens_as_token_ids (vLLM >= 0.6) or return token_ids"
            )
        ids = [int(str(t).split(":", 1)[1]) for t in tokens]
    logprobs = [float(x) for x in lp.get("token_logprobs") or []]
    if len(logprobs) != len(ids):
        raise RuntimeError(f"server returned {len(ids)} tokens but {len(logprobs)} logprobs")
    return Completion(
        list(ids), logprobs, "length" if c.get("finish_reason") == "length" else "stop"
    )


def make_engine(
    cfg: EngineCfg | None,
    model: nn.Module,
    *,
    pad_token_id: int,
    precision: str = "fp32",
    max_batch: int = 64,
    routing_replay: bool = False,
) -> Engine:
    """The rollout engine a config names, holding `model`'s current weights.

    Args:
        cfg: `engine:` of a stage; None is the LocalEngine.
        model: the policy (copied: to the LocalEngine's private weights, or to disk for vLLM).
        pad_token_id, precision, max_batch: LocalEngine settings (servers take fp32 only).
        routing_replay: the LocalEngine records each completion's MoE routing (servers cannot).
    """
    if cfg is None or cfg.kind == "local":
        return LocalEngine(
            model,
            pad_token_id=pad_token_id,
            precision=precision,
            max_batch=max_batch,
            record_routing=routing_replay,
        )
    if routing_replay:
        raise ConfigError(
            f"routing_replay records the experts of the LocalEngine's own forwards; engine.kind "
            f"{cfg.kind} does not return them: use engine.kind local or turn routing_replay off"
        )
    if precision != "fp32":
        raise ConfigError(
            f"engine.kind {cfg.kind} serves the checkpoint's fp32 weights (a server's own dtype "
            f"flag goes in engine.extra_args); engine precision {precision!r} is for the local "
            "engine"
        )
    server = {  # what both server engines take from `engine:`
        "url": cfg.url,
        "workdir": cfg.workdir,
        "python": cfg.python,
        "max_model_len": cfg.max_model_len,
        "startup_timeout": cfg.startup_timeout,
        "extra_args": cfg.extra_args,
    }
    if cfg.kind == "sglang":
        from arcforge.rollout.sglang_engine import SGLangEngine  # it imports this module

        return SGLangEngine(model, **server)
    from arcforge.rollout.vllm_engine import VLLMEngine  # it imports this module

    return VLLMEngine(model, kv_cache_gib=cfg.kv_cache_gib, **server)
