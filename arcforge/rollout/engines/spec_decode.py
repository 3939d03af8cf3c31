"""Speculative decoding with MTP drafts and exact acceptance (the LocalEngine's `mtp` option).

Each round: the MTP head (arcforge.model.mtp) drafts k tokens d_1..d_k from q_1..q_k, the target
model verifies [x, d_1..d_k] in one forward (x: the last emitted token, not yet in the target's
cache), giving p_1..p_{k+1}. The rejection rule of speculative sampling (Leviathan et al. 2023;
Chen et al. 2023) then keeps the target's distribution exactly:

    accept d_i with probability min(1, p_i(d_i) / q_i(d_i)), in order;
    at the first rejection emit a sample of norm(max(0, p_i - q_i)) and stop;
    if all k are accepted, emit a sample of p_{k+1}.

So a round emits between 1 and k+1 tokens, each distributed as the target's next token given the
ones before. Greedy (temperature 0) is the one-hot case: a draft is kept iff it is the target's
argmax, and the emitted tokens are exactly plain greedy decoding's. p is the target's sampling
distribution (temperature, top-k, top-p as in the engine's sampler), and the logprob returned for
each emitted token is the target's own (raw log_softmax, or tempered with `tempered_logprobs`)
from the verify forward: TITO and RL importance ratios see the target model only.

KV caches: the target's `DynamicCache` holds every verified token; on rejection it is cropped
back to the accepted prefix. The MTP head keeps its own cache whose entry j pairs the target's
hidden state at j with token j+1; draft steps 2..k feed the head's own output in place of the
target's hidden state, so those entries are cropped after each round and rebuilt from the true
hidden states of the accepted tokens at the start of the next.

`align_on_own_text` (mtp_align.py) fits the MTP head to the target on the target's own greedy
text (the self-distillation of arcforge.model.mtp.align_mtp), which raises acceptance.

Deliberate simplification: rows decode one at a time (batch 1): rows of a batch accept different
numbers of drafts, and ragged per-row caches would cost more code than this module. It is a
latency option; batched throughput stays with the plain decoder.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch
from torch import nn
from transformers import DynamicCache

from arcforge.model.mtp import MTPHead
from arcforge.rollout.engines.base import SamplingParams
from arcforge.rollout.engines.decoder import quantize_int8

Row = tuple[list[int], list[float], str]  # token ids, target logprobs, finish reason


@dataclass
class SpecStats:
    """Counts since the engine was built: verify rounds, drafted and accepted tokens."""

    rounds: int = 0
    drafted: int = 0
    accepted: int = 0
    emitted: int = 0  # tokens emitted by verify rounds (accepted drafts + one per round)

    @property
    def mean_accept_length(self) -> float:
        """Tokens emitted per target forward (1 = no speedup possible; k+1 at most)."""
        return self.emitted / max(1, self.rounds)


def target_probs(logits: torch.Tensor, p: SamplingParams) -> torch.Tensor:
    """logits (..., V) raw -> the sampling distribution (..., V): one-hot argmax at T=0,
    else softmax(logits / T) restricted to top-k / top-p (the engine sampler's rule)."""
    if p.temperature == 0:
        return torch.zeros_like(logits).scatter_(-1, logits.argmax(-1, keepdim=True), 1.0)
    z = logits / p.temperature  # (..., V)
    if 0 < p.top_k < z.shape[-1]:
        kth = torch.topk(z, p.top_k, dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, -math.inf)
    if p.top_p < 1.0:
        zs, idx = z.sort(dim=-1, descending=True)
        ps = zs.softmax(dim=-1)
        drop = ps.cumsum(dim=-1) - ps > p.top_p  # mass before this token > top_p
        z = z.masked_fill(torch.zeros_like(drop).scatter(-1, idx, drop), -math.inf)
    return z.softmax(dim=-1)


def sample_probs(probs: torch.Tensor, gen: torch.Generator | None) -> torch.Tensor:
    """One token per row of probs (B, V) by inverse CDF; a one-hot row needs no randomness."""
    if bool((probs.max(dim=-1).values == 1.0).all()):
        return probs.argmax(dim=-1)  # (B,)
    cdf = probs.cumsum(dim=-1)  # (B, V)
    u = torch.rand(probs.shape[0], 1, generator=gen, device=probs.device)  # (B, 1)
    x = (1.0 - u) * cdf[:, -1:]  # in (0, total]: zero-probability tokens are never picked
    return torch.searchsorted(cdf, x).squeeze(1).clamp(max=probs.shape[-1] - 1)


def speculative_accept(
    p: torch.Tensor, q: torch.Tensor, drafts: torch.Tensor, gen: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The rejection rule of the module doc, batched over independent rows.

    Args:
        p: (B, k+1, V) target distributions at the k draft positions and the one after.
        q: (B, k, V) draft distributions the drafts were sampled from.
        drafts: (B, k) draft tokens.
        gen: random generator (no draw is made where every distribution is one-hot).
    Returns:
        n_accepted (B,) in [0, k] and the extra token (B,) emitted after the accepted drafts.
    """
    B, k, V = q.shape
    rows = torch.arange(B, device=p.device)
    pd = p[:, :k].gather(-1, drafts[..., None]).squeeze(-1)  # (B, k) p_i(d_i)
    qd = q.gather(-1, drafts[..., None]).squeeze(-1)  # (B, k) q_i(d_i) > 0: d_i ~ q_i
    if bool(((pd == 0) | (pd >= qd)).all()):  # no coin can change the outcome (greedy)
        ok = pd >= qd
    else:
        u = torch.rand(B, k, generator=gen, device=p.device)  # (B, k)
        ok = u * qd < pd  # probability min(1, p/q)
    n_acc = ok.long().cumprod(dim=-1).sum(dim=-1)  # (B,) leading accepted drafts
    q_ext = torch.cat([q, q.new_zeros(B, 1, V)], dim=1)  # (B, k+1, V): q_{k+1} = 0
    resid = (p[rows, n_acc] - q_ext[rows, n_acc]).clamp(min=0)  # (B, V) max(0, p - q)
    mass = resid.sum(dim=-1, keepdim=True)  # (B, 1); 0 only if p = q, where nothing rejects
    resid = torch.where(mass > 0, resid / mass.clamp(min=1e-30), p[rows, n_acc])
    return n_acc, sample_probs(resid, gen)


class SpecDecoder:
    """Batch-1 speculative decoding of a causal LM with its MTP head (see module doc).

    Args:
        model: the target causal LM (the engine's private copy, at the engine's precision).
        mtp: its MTP head; copied and cast to `precision` ("fp32", "bf16" or "int8").
        draft_steps: drafts per round (default: the head's trained depth).
    """

    def __init__(
        self, model: nn.Module, mtp: MTPHead, precision: str = "fp32", draft_steps: int = 0
    ) -> None:
        self.model = model
        self.mtp = copy.deepcopy(mtp).eval().requires_grad_(False)
        self.mtp.to(next(model.parameters()).device)
        if precision == "bf16":
            self.mtp.to(torch.bfloat16)
        elif precision == "int8":
            quantize_int8(self.mtp)
        self.k = draft_steps or mtp.draft_steps
        self.stats = SpecStats()
        self._base, self._head = model.get_decoder(), model.get_output_embeddings()
        self._embed = model.get_input_embeddings()

    def generate(self, prompts: list[list[int]], p: SamplingParams) -> list[Row]:
        """Rows ordered prompt by prompt, the n samples adjacent; row r samples with its own
        generator seeded `p.seed + r` (the LocalEngine's convention)."""
        out, dev = [], self._embed.weight.device
        for i, prompt in enumerate(prompts):
            for j in range(p.n):
                r = i * p.n + j
                gen = None
                if p.seed is not None:
                    gen = torch.Generator(device=dev).manual_seed(p.seed + r)
                out.append(self._row(prompt, p, gen))
        return out

    def _logprob(self, logits: torch.Tensor, toks: torch.Tensor, p: SamplingParams):
        """Target logprobs (n,) of toks (n,) under logits (n, V), the engine's convention."""
        z = logits / p.temperature if p.tempered_logprobs and p.temperature > 0 else logits
        return torch.log_softmax(z, dim=-1).gather(-1, toks[:, None]).squeeze(-1)

    def _draft(self, mh, mt, cache, k: int, p: SamplingParams, gen):
        """Feed the MTP entries (hidden mh (1, m, d), next tokens mt (1, m)), then draft k
        tokens; returns drafts (k,) and their distributions q (k, V) (None when greedy)."""
        g = self.mtp(mh, self._embed(mt), cache=cache)[:, -1:]  # (1, 1, d)
        drafts, qs = [], []
        for i in range(k):
            logits = self._head(g)[:, 0]  # (1, V)
            if p.temperature == 0:  # greedy: q is one-hot at the argmax, never materialised
                d = logits.argmax(dim=-1)  # (1,)
            else:
                q = target_probs(logits.float(), p)  # (1, V)
                d = sample_probs(q, gen)  # (1,)
                qs.append(q)
            drafts.append(d)
            if i + 1 < k:
                g = self.mtp(g, self._embed(d[:, None]), cache=cache)  # (1, 1, d)
        return torch.cat(drafts), (torch.cat(qs) if qs else None)

    def _row(self, prompt: list[int], p: SamplingParams, gen) -> Row:
        dev, N = self._embed.weight.device, p.max_new_tokens
        stop = set(p.stop_token_ids)
        cache = DynamicCache(config=self.model.config)
        mcache = DynamicCache(config=self.mtp.block.config)
        ids = torch.tensor([prompt], device=dev)  # (1, P)
        h = self._base(input_ids=ids, cache=cache, use_cache=True).last_hidden_state  # (1, P, d)
        logits = self._head(h[:, -1]).float()  # (1, V)
        x = sample_probs(target_probs(logits, p), gen)  # (1,)
        toks, lps = [int(x)], [float(self._logprob(logits, x, p))]
        mh, mt = h[:, :-1], ids[:, 1:]  # MTP entries waiting for the head's cache
        h_last = h[:, -1:]  # (1, 1, d) target hidden state of the last cached token
        while len(toks) < N and toks[-1] not in stop:
            k = min(self.k, N - len(toks) - 1)  # a round emits at most k + 1 tokens
            mh, mt = torch.cat([mh, h_last], dim=1), torch.cat([mt, x[:, None]], dim=1)
            if k > 0:
                drafts, q = self._draft(mh, mt, mcache, k, p, gen)  # (k,), (k, V)
                if k > 1:
                    mcache.crop(-(k - 1))  # entries fed the head's own output: rebuilt later
                mh, mt = mh[:, :0], mt[:, :0]
            else:
                drafts = x[:0]
                q = torch.zeros(0, logits.shape[-1], device=dev) if p.temperature > 0 else None
            v_ids = torch.cat([x, drafts])[None]  # (1, k+1)
            hv = self._base(input_ids=v_ids, cache=cache, use_cache=True).last_hidden_state
            vlogits = self._head(hv[0]).float()  # (k+1, V)
            if p.temperature == 0:  # speculative_accept's one-hot case, without the maths
                best = vlogits.argmax(dim=-1)  # (k+1,)
                n = int((best[:k] == drafts).long().cumprod(dim=0).sum())
                extra = best[n : n + 1]  # (1,)
            else:
                n_acc, extra = speculative_accept(
                    target_probs(vlogits, p)[None], q[None], drafts[None], gen
                )
                n = int(n_acc)
            emitted = torch.cat([drafts[:n], extra])  # (n+1,)
            if k > n:
                cache.crop(-(k - n))  # drop the rejected drafts' keys and values
            self.stats.rounds += 1
            self.stats.drafted += k
            self.stats.accepted += n
            self.stats.emitted += n + 1
            lp = self._logprob(vlogits[: n + 1], emitted, p).tolist()
            for t, lp_t in zip(emitted.tolist(), lp):
                if len(toks) < N and toks[-1] not in stop:
                    toks.append(t)
                    lps.append(lp_t)
            # next round: entries (h at x, d_1) .. (h at d_{n-1}, d_n) and the new last token
            mh, mt = torch.cat([mh, hv[:, :n]], dim=1), torch.cat([mt, drafts[None, :n]], dim=1)
            h_last, x = hv[:, n : n + 1], extra
        finish = "stop" if toks[-1] in stop else "length"
        return toks, lps, finish
