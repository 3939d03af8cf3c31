"""Multi-token prediction (MTP): GLM-5 / DeepSeek-V3's next-n head, its loss and its files.

One MTP layer predicts the token after next. At depth k, position i combines the previous
depth's representation with the embedding of the token k ahead and predicts the one after:

    h'^k_i = W [RMSNorm(h^{k-1}_i) ; RMSNorm(Emb(t_{i+k}))]          (W: 2d -> d)
    h^k_{1:T-k} = Block(h'^k_{1:T-k})                                 (causal over i)
    P(t_{i+k+1}) = softmax(LMHead(h^k_i))

h^0 is the main model's last hidden state; Emb and LMHead are the main model's own (shared, not
copied). As in GLM-5 the `draft_steps` depths share one layer's parameters, so the same layer
drafts every speculative step. The loss is the mean next-token cross-entropy over the depths;
the trainer adds it with a weight lambda to the LM loss, and its gradient reaches the main model
through h^0 as well (DeepSeek-V3 trains both together).

The block is a one-layer instance of the main model's own base class (MLA + DSA for GLM-5, a
Llama layer for Llama) built from a copy of its config, so it reuses transformers' attention,
RoPE and caches (`DynamicCache.crop` rolls its drafts back); its final norm is the head's
output norm. Deliberate simplifications: the block's MLP is the config's first layer type
(dense for the GLM-5 presets, where DeepSeek-V3's MTP layer is a MoE), and its own embedding
table is a 1-row stub (it only ever receives `inputs_embeds`).

For speculative decoding, `align_mtp` can then fit the head to the main model itself
(self-distillation, as Medusa-2 and EAGLE do for their draft heads): KL from the main model's
own next-token distribution on its own continuations, the main model frozen. Acceptance
depends on how often drafts agree with the target, not with the data.

Files: `mtp.safetensors` (this head's weights only) and `mtp.json` (its shape) beside a
`save_pretrained` checkpoint; stock transformers ignores both, so the directory still loads as is.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Iterator
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import nn
from transformers import AutoConfig, AutoModel, PretrainedConfig

from arcforge.model.dsa import use_stable_topk

MTP_WEIGHTS = "mtp.safetensors"
MTP_META = "mtp.json"
_LAYER_LISTS = ("layer_types", "mlp_layer_types", "indexer_types")  # per-layer config lists


def block_config(config: PretrainedConfig) -> PretrainedConfig:
    """A one-layer copy of the main model's config for the MTP block (1-row embedding stub)."""
    cfg = copy.deepcopy(config)
    cfg.num_hidden_layers = 1
    for name in _LAYER_LISTS:
        if isinstance(getattr(cfg, name, None), list):
            setattr(cfg, name, getattr(cfg, name)[:1])
    cfg.vocab_size, cfg.pad_token_id = 1, None
    return cfg


class MTPHead(nn.Module):
    """One shared MTP layer applied for `draft_steps` depths (see module doc).

    Args:
        config: the main model's HF config (hidden size, norms, attention and MLP shapes).
        draft_steps: training depths D = speculative draft tokens per round.
    """

    def __init__(self, config: PretrainedConfig, draft_steps: int = 2) -> None:
        super().__init__()
        if draft_steps < 1:
            raise ValueError(f"draft_steps must be >= 1, got {draft_steps}")
        d, eps = config.hidden_size, getattr(config, "rms_norm_eps", 1e-6)
        self.draft_steps = draft_steps
        self.hnorm = nn.RMSNorm(d, eps=eps)
        self.enorm = nn.RMSNorm(d, eps=eps)
        self.proj = nn.Linear(2 * d, d, bias=False)
        self.block = use_stable_topk(AutoModel.from_config(block_config(config)))

    def forward(
        self,
        hidden: torch.Tensor,
        next_embeds: torch.Tensor,
        cache=None,
    ) -> torch.Tensor:
        """One depth: hidden (B, T, d) of the previous depth, next_embeds (B, T, d) the
        embeddings of the tokens one ahead -> (B, T, d) normed representation for the LM head.
        With a `cache` the T positions continue the cached ones (decoding)."""
        x = torch.cat([self.hnorm(hidden), self.enorm(next_embeds)], dim=-1)  # (B, T, 2d)
        out = self.block(inputs_embeds=self.proj(x), cache=cache, use_cache=cache is not None)
        return out.last_hidden_state  # (B, T, d)


def main_hidden(model: nn.Module, input_ids: torch.Tensor) -> torch.Tensor:
    """The main model's last hidden states (B, T, d): what its LM head reads."""
    return model.get_decoder()(input_ids=input_ids).last_hidden_state


def _depth_logits(
    model: nn.Module, mtp: MTPHead, input_ids: torch.Tensor, hidden: torch.Tensor
) -> Iterator[tuple[int, torch.Tensor]]:
    """Yields (k, logits (B, L-k-1, V)) for depths k = 1..D: depth k at position i predicts
    t_{i+k+1}."""
    embed, head = model.get_input_embeddings(), model.get_output_embeddings()
    L, h = input_ids.shape[1], hidden
    for k in range(1, mtp.draft_steps + 1):
        n = L - k - 1  # positions i with a target t_{i+k+1}
        if n < 1:
            if k == 1:
                raise ValueError(
                    f"sequences of {L} tokens are too short for multi-token prediction"
                )
            return
        h = mtp(h[:, :n], embed(input_ids[:, k : k + n]))  # (B, n, d)
        yield k, head(h)


def mtp_loss(
    model: nn.Module,
    mtp: MTPHead,
    input_ids: torch.Tensor,
    hidden: torch.Tensor | None = None,
) -> torch.Tensor:
    """Mean over depths k = 1..D of the cross-entropy of t_{i+k+1} from depth k at i.

    Args:
        model: the main causal LM (its input embeddings and LM head are used).
        mtp: the MTP head.
        input_ids: (B, L) token ids.
        hidden: the main model's last hidden states for the first L-1 (or all L) positions,
            when the caller already has them from the LM loss's forward; computed otherwise.
    Returns:
        Scalar loss (unweighted: the caller applies lambda).
    """
    if hidden is None:
        hidden = main_hidden(model, input_ids[:, :-1])
    losses = []
    for k, logits in _depth_logits(model, mtp, input_ids, hidden):
        target = input_ids[:, k + 1 : k + 1 + logits.shape[1]]  # (B, n)
        losses.append(F.cross_entropy(logits.flatten(0, 1).float(), target.flatten()))
    return torch.stack(losses).mean()


def mtp_distill_loss(model: nn.Module, mtp: MTPHead, input_ids: torch.Tensor) -> torch.Tensor:
    """Mean over depths of KL(p || q_k): q_k is depth k's distribution of t_{i+k+1} at i, p the
    main model's own distribution of the same token (its prediction at position i+k, which
    sees the true tokens up to t_{i+k}). The main model is a fixed teacher (no gradient).

    Speculative decoding accepts a draft with probability min(1, p/q) (greedy: iff the two
    argmaxes agree), so matching q to p, rather than to the data, is what raises acceptance.
    """
    with torch.no_grad():
        hidden = main_hidden(model, input_ids)  # (B, L, d)
        teacher = model.get_output_embeddings()(hidden).float().log_softmax(-1)  # (B, L, V)
    losses = []
    for k, logits in _depth_logits(model, mtp, input_ids, hidden):
        log_q = logits.float().log_softmax(-1)  # (B, n, V)
        log_p = teacher[:, k : k + log_q.shape[1]]  # (B, n, V)
        losses.append((log_p.exp() * (log_p - log_q)).sum(-1).mean())
    return torch.stack(losses).mean()


def align_mtp(
    model: nn.Module,
    mtp: MTPHead,
    sequences: torch.Tensor,
    steps: int,
    lr: float = 1e-3,
    batch_size: int = 8,
    seed: int = 0,
) -> list[float]:
    """Fit the MTP head to the main model by `mtp_distill_loss`, the main model frozen.

    The self-distillation step of speculative decoding's draft heads (Medusa-2, EAGLE): on
    the model's own continuations (e.g. greedy decodes of training prompts) the head learns
    the text it will be asked to draft, and the teacher is the distribution its drafts are
    accepted against. AdamW, constant lr, batches drawn with replacement from `sequences`.

    Args:
        model: the main causal LM (left unchanged).
        mtp: the head to fit, in place.
        sequences: (N, L) token ids, L >= 3.
        steps: optimizer steps.
    Returns:
        The loss of every step.
    """
    gen = torch.Generator().manual_seed(seed)
    was_training, mtp_training = model.training, mtp.training
    frozen = [p for p in model.parameters() if p.requires_grad]  # embeddings, head: no grads
    model.eval().requires_grad_(False)
    mtp.train()
    optim = torch.optim.AdamW(mtp.parameters(), lr=lr, weight_decay=0.0)
    losses = []
    for _ in range(steps):
        rows = sequences[torch.randint(len(sequences), (batch_size,), generator=gen)]
        loss = mtp_distill_loss(model, mtp, rows)
        optim.zero_grad(set_to_none=True)
        loss.backward()
        optim.step()
        losses.append(loss.item())
    for p in frozen:
        p.requires_grad_(True)
    model.train(was_training)
    mtp.train(mtp_training)
    return losses


def save_mtp(mtp: MTPHead, ckpt_dir: str | Path) -> Path:
    """Write `mtp.safetensors` + `mtp.json` into a checkpoint directory (atomic renames)."""
    out = Path(ckpt_dir)
    out.mkdir(parents=True, exist_ok=True)
    weights = {k: v.detach().contiguous().cpu() for k, v in mtp.state_dict().items()}
    tmp = out / f".{MTP_WEIGHTS}.tmp-{os.getpid()}"
    save_file(weights, str(tmp))
    os.replace(tmp, out / MTP_WEIGHTS)
    meta = {"draft_steps": mtp.draft_steps, "layers": 1, "shared_across_steps": True}
    (out / MTP_META).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return out / MTP_WEIGHTS


def has_mtp(ckpt_dir: str | Path) -> bool:
    """Whether a checkpoint directory carries an MTP head."""
    return (Path(ckpt_dir) / MTP_WEIGHTS).is_file()


def load_mtp(
    ckpt_dir: str | Path,
    config: PretrainedConfig | None = None,
    device: torch.device | None = None,
) -> MTPHead:
    """The MTP head saved in `ckpt_dir` by `save_mtp`.

    Args:
        ckpt_dir: a checkpoint directory with `mtp.safetensors` and `mtp.json`.
        config: the main model's config (read from `ckpt_dir/config.json` when None).
        device: where to place it (CPU by default).
    """
    p = Path(ckpt_dir)
    if not has_mtp(p):
        raise FileNotFoundError(f"no MTP head in {p} (expected {MTP_WEIGHTS} and {MTP_META})")
    meta = json.loads((p / MTP_META).read_text())
    config = config or AutoConfig.from_pretrained(str(p), local_files_only=True)
    mtp = MTPHead(config, draft_steps=int(meta["draft_steps"]))
    mtp.load_state_dict(load_file(str(p / MTP_WEIGHTS)))
    return mtp.to(device or torch.device("cpu"))
