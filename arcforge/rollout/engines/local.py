"""`LocalEngine`: the `Engine` protocol in-process, in PyTorch.

Batched sampling over a left-padded batch with a preallocated KV cache. For Llama-family models
(llama, qwen2, qwen3) it runs its own lean decode step over the model's weights (q/k/v and
gate/up fused, SDPA attention, no mask building or logits processors per step: decoder.py's
`FastDecoder`); any other causal LM runs through the model's own forward with a `DynamicCache`
(`HFDecoder`). The engine owns a private copy of the weights, so training the trainer's model
changes nothing until `load_weights`. `precision` makes the copy bf16 or int8 so that the
train/inference mismatch IcePop guards against is real. With an `mtp` head it decodes
speculatively, one row at a time (spec_decode.py): the tokens and logprobs are distributed
exactly as the target model's. With `record_routing` (an MoE model: transformers'
`glm_moe_dsa`) each completion carries the experts every router picked in the forwards that
generated it, for routing replay in training (arcforge.model.moe). Logprobs follow the
convention of base.py's header.

Deliberate simplifications: int8 is *simulated* W8A8 dynamic quantization (per-output-channel
int8 weights, per-token int8 activations, integer products accumulated in fp32): the numerics
of an int8 kernel, not its speed. `torch.ao.quantization.quantize_dynamic` still exists in
torch 2.13 but its quantized dtypes are deprecated, and torchao is not a dependency.
Generation stops only at `stop_token_ids` (pass the EOS id there).
"""

from __future__ import annotations

import copy
import math
from contextlib import nullcontext
from typing import TYPE_CHECKING

import torch
from torch import nn

from arcforge.rollout.engines.base import Completion, SamplingParams
from arcforge.rollout.engines.decoder import FastDecoder, HFDecoder, fast_supported, quantize_int8

if TYPE_CHECKING:  # the MTP and MoE modules load transformers' GLM-5 code: only when used
    from arcforge.model.moe import RoutingRecord
    from arcforge.model.mtp import MTPHead
    from arcforge.rollout.engines.spec_decode import SpecStats

PRECISIONS = ("fp32", "bf16", "int8")


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
        self._fast = fast and mtp is None and fast_supported(self._master)
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
        dec: nn.Module = FastDecoder(m) if self._fast else HFDecoder(m)
        if self.precision == "bf16":
            dec = dec.to(torch.bfloat16)
        elif self.precision == "int8":
            quantize_int8(dec)
        self._dec = dec.eval()
        self._spec = None
        if self._mtp is not None:  # HFDecoder: dec.model is the HF model at this precision
            from arcforge.rollout.engines.spec_decode import SpecDecoder

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
