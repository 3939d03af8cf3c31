"""Stage runners: the glue between a stage config, its data sources, the model and its loop.

`prepare_world` / `prepare_tokenizer` run once per run (cached in RUN_DIR/world and
RUN_DIR/tokenizer). The LM runner (pretrain / midtrain) curates text sources, packs a weighted
mixture per context phase and trains; the SFT runner renders conversations with the chat
template. Both finish by writing a save_pretrained checkpoint with the tokenizer, loadable as is
by transformers and vLLM. `world:` sources resolve through `world_records`, `git:<path>` to
repo-level sequences of a local git repository.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch

from arcforge.config import LMStageCfg, RunCfg, SFTStageCfg
from arcforge.data.curate import curate
from arcforge.data.midtrain import git_repo_sequences, repo_sequence, synthetic_long_doc
from arcforge.data.packing import PackedDataset, pack, tokenize_docs
from arcforge.data.sources import Record, load_records, register_world_resolver
from arcforge.errors import ConfigError, UserError
from arcforge.model.checkpoint import (
    init_model,
    load_model,
    resize_for_tokenizer,
    save_checkpoint,
    set_max_positions,
    set_rope_theta,
)
from arcforge.model.presets import build_config
from arcforge.model.tokenizer import load_tokenizer, save_tokenizer, train_tokenizer
from arcforge.pipeline import RunContext, register_stage
from arcforge.train.lm import heldout_loss, train_lm
from arcforge.train.loop import Phase
from arcforge.train.sft import Conversation, encode_conversations, train_sft

HELDOUT_SEQ_LEN = 128  # fixed so held-out losses are comparable across stages


# ---- world and tokenizer -------------------------------------------------------------------


def build_world_from_cfg(cfg: RunCfg):
    from arcforge.world import WorldConfig, build_world

    known = set(WorldConfig.__dataclass_fields__)
    bad = sorted(set(cfg.world.options) - known)
    if bad:
        raise ConfigError(f"world.options: unknown key(s) {bad}; known: {sorted(known)}")
    try:
        wcfg = WorldConfig.from_dict({**cfg.world.options, "seed": cfg.world.seed,
                                      "scale": cfg.world.scale})
    except (TypeError, ValueError) as err:
        raise ConfigError(f"world.options: {err}") from None
    return build_world(wcfg)


def world_records(world, suite: str, split: str | None) -> list[Record]:
    """Resolve `world:<suite>[:split]` into records."""
    if suite in ("corpus", "heldout"):
        docs = world.corpus() if suite == "corpus" else world.heldout_corpus()
        return [Record(text=d.text, origin=f"world:{suite}#{d.id}") for d in docs]
    if suite == "repos":
        # repos behind held-out SWE tasks stay out of training data
        held = {t.context.get("repo") for t in world.tasks("swe", "test")}
        out = []
        for repo in (r for r in world.repos if r.name not in held):
            bug = repo.inject_bug(__import__("random").Random(repo.name))
            files = {**repo.files, **repo.tests}
            out.append(Record(text=repo_sequence(files, bug.issue_text, bug.fix_diff),
                              origin=f"world:repos#{repo.name}"))
        return out
    if suite == "long_context":
        # one document per item, "{text}\n\nQuestion: {q}\nAnswer: {a}", the probe's format
        sizes = world.config.long_context_chars
        items = [it for k, size in enumerate(sizes)
                 for it in world.long_context(n=max(20, 600 // len(sizes)), target_chars=size,
                                              split=split or "train", seed=k)]
        return [Record(text=synthetic_long_doc([it]), origin=f"world:long_context#{i}")
                for i, it in enumerate(items)]
    if suite == "sft" or suite.startswith("sft/"):
        kind = suite.split("/", 1)[1] if "/" in suite else None
        return [Record(messages=d.messages, origin=f"world:sft#{d.id}",
                       meta={"tools": d.tools, "mode": d.mode})
                for d in world.sft_demos() if kind is None or d.kind == kind]
    from arcforge.data.sources import record_from_task

    return [record_from_task(t, f"world:{suite}#{t.id}") for t in world.tasks(suite, split or "train")]


def prepare_world(ctx: RunContext):
    from arcforge.world import World

    wdir = ctx.run_dir / "world"
    if (wdir / "DONE").exists():
        world = World.load(wdir)
    else:
        print("[world] generating the embedded world ...")
        world = build_world_from_cfg(ctx.cfg)
        world.save(wdir)
        (wdir / "DONE").write_text("ok")
    register_world_resolver(lambda suite, split: world_records(world, suite, split))
    return world


def prepare_tokenizer(ctx: RunContext):
    cfg = ctx.cfg
    src = cfg.model.path or cfg.tokenizer.path
    if src:
        if not Path(src).exists():
            raise UserError(f"tokenizer/model path not found: {src}")
        tok, _ = load_tokenizer(src)
        return tok
    tdir = ctx.run_dir / "tokenizer"
    if (tdir / "DONE").exists():
        return load_tokenizer(tdir)[0]
    docs, _ = curate(ctx.world.corpus())
    texts, n = [], 0
    for d in docs:
        if n >= cfg.tokenizer.train_chars:
            break
        texts.append(d.text)
        n += len(d.text)
    print(f"[tokenizer] training byte-level BPE ({cfg.tokenizer.vocab_size}) on {n / 1e6:.1f}M chars")
    tok = train_tokenizer(texts, cfg.tokenizer.vocab_size)
    save_tokenizer(tok, tdir)
    (tdir / "DONE").write_text("ok")
    return tok


# ---- model ---------------------------------------------------------------------------------


def model_for_stage(ctx: RunContext, stage) -> torch.nn.Module:
    """The stage's starting model: its init checkpoint, the user's model.path, or a preset."""
    ckpt = ctx.init_checkpoint(stage)
    if ckpt is not None:
        return load_model(ckpt)
    m = ctx.cfg.model
    if m.path:
        model = load_model(m.path)
        resize_for_tokenizer(model, ctx.tokenizer)
        return model
    tok = ctx.tokenizer
    conf = build_config(m.preset, vocab_size=len(tok), max_position_embeddings=
                        m.max_position_embeddings, rope_theta=m.rope_theta,
                        pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
                        eos_token_id=tok.eos_token_id, **m.overrides)
    return init_model(conf, seed=m.seed)


# ---- LM stages -----------------------------------------------------------------------------


def _source_texts(spec: str) -> list[str]:
    if spec.startswith("git:"):
        path = Path(spec[4:])
        if not (path / ".git").exists():
            raise UserError(f"source {spec!r}: {path} is not a git repository")
        return git_repo_sequences(path)
    recs = load_records(spec)
    return [r.text if r.text is not None else _record_as_text(r) for r in recs]


def _record_as_text(r: Record) -> str:
    if r.messages is not None:
        return "\n".join(f"{m.role}: {m.content}" for m in r.messages)
    return f"{r.prompt}\n{r.answer or ''}"


def mixed_rows(streams: list[list[int]], weights: list[float], seq_len: int, n_rows: int,
               seed: int) -> torch.Tensor:
    """(n_rows, seq_len+1) rows drawn from each source's packed rows in proportion to weight."""
    total_w = sum(weights)
    out = []
    for i, (stream, w) in enumerate(zip(streams, weights)):
        rows = pack(stream, seq_len)  # (N_i, T+1)
        if len(rows) == 0:
            raise UserError(f"source #{i} has fewer than {seq_len + 1} tokens at seq_len {seq_len}")
        k = max(1, round(n_rows * w / total_w))
        g = torch.Generator().manual_seed(seed + 17 * i)
        reps = math.ceil(k / len(rows))
        idx = torch.cat([torch.randperm(len(rows), generator=g) for _ in range(reps)])[:k]
        out.append(rows[idx])
    return torch.cat(out)


@register_stage("pretrain", "midtrain")
def run_lm_stage(ctx: RunContext, stage: LMStageCfg, out: Path) -> dict:
    tok = ctx.tokenizer
    model = model_for_stage(ctx, stage)
    streams, weights, curation = [], [], {}
    for s in stage.sources:
        texts = _source_texts(s.source)
        if stage.curate and s.source.startswith("world:corpus"):
            kept, rep = curate(texts)
            curation[s.source] = {"in": rep.n_in, "kept": rep.n_kept, **rep.counts}
            texts = kept
        streams.append(tokenize_docs(texts, tok))
        weights.append(s.weight)
    held_docs = [d.text for d in ctx.world.heldout_corpus()[: stage.heldout_docs * 4]]
    held = pack(tokenize_docs(held_docs, tok), HELDOUT_SEQ_LEN)[: stage.heldout_docs]
    schedule = stage.context_schedule or [
        type("C", (), {"seq_len": stage.seq_len, "tokens": stage.tokens, "rope_theta": None})()]
    phases = []
    for i, cs in enumerate(schedule):
        bs = max(1, stage.tokens_per_batch // cs.seq_len)
        steps = max(1, cs.tokens // (bs * cs.seq_len))
        rows = mixed_rows(streams, weights, cs.seq_len, steps * bs, stage.seed + i)
        ds = PackedDataset(rows)
        hook = _context_hook(cs.seq_len, cs.rope_theta) if cs.rope_theta else None
        phases.append(Phase(steps, lambda step, ds=ds, bs=bs: ds.batch(step, bs, stage.seed),
                            on_enter=hook, name=f"ctx{cs.seq_len}"))
    res = train_lm(model, phases, stage.optim, out, heldout=lambda m: heldout_loss(m, held),
                   log_every=stage.log_every, checkpoint_every=stage.checkpoint_every,
                   heldout_every=stage.heldout_every, desc=f"{stage.kind} {stage.name}")
    final_held = heldout_loss(model, held)
    save_checkpoint(model, tok, out / "checkpoint", extra={"stage": stage.name})
    (out / "curation.json").write_text(json.dumps(curation, indent=1))
    return {"steps": res.steps, "final_loss": res.final_loss, "heldout_loss": final_held,
            "tokens": res.tokens,
            "tokens_per_s": res.tokens / max(1e-9, res.seconds),
            "context": [c.seq_len for c in schedule], "curation": curation}


def _context_hook(seq_len: int, theta: float):
    def hook(model: torch.nn.Module) -> None:
        set_rope_theta(model, theta)
        if model.config.max_position_embeddings < seq_len:
            set_max_positions(model, seq_len)

    return hook


# ---- SFT -----------------------------------------------------------------------------------


def _conversations(ctx: RunContext, stage: SFTStageCfg) -> list[Conversation]:
    tools = ctx.world.tools()
    convs = []
    for s in stage.sources:
        for r in load_records(s.source):
            if r.messages is None:
                from arcforge.types import Message

                if r.prompt is None:
                    continue
                r.messages = [Message(role="user", content=r.prompt),
                              Message(role="assistant", content=r.answer or "")]
            names = r.meta.get("tools", [])
            mode = r.meta.get("mode")
            convs.append(Conversation(r.messages, [tools[n] for n in names if n in tools],
                                      True if mode == "preserved" else None))
    return convs


@register_stage("sft")
def run_sft_stage(ctx: RunContext, stage: SFTStageCfg, out: Path) -> dict:
    tok = ctx.tokenizer
    model = model_for_stage(ctx, stage)
    examples, counts = encode_conversations(_conversations(ctx, stage), tok, stage.max_len,
                                            stage.preserve_thinking)
    if not examples:
        raise UserError(f"stage {stage.name!r}: its sources gave no trainable conversation")
    res = train_sft(model, examples, stage, out, pad_id=tok.pad_token_id or 0)
    save_checkpoint(model, tok, out / "checkpoint", extra={"stage": stage.name})
    return {"steps": res.steps, "final_loss": res.final_loss, "examples": counts["kept"],
            "truncated": counts["truncated"], "dropped": counts["dropped_no_target"],
            "tokens_per_s": res.tokens / max(1e-9, res.seconds)}
