"""The evaluation harness: suites × stage checkpoints → the capability matrix.

`evaluate_checkpoint` loads one checkpoint and runs the configured suites on held-out tasks;
`evaluate_run` does that for every finished stage of a run and caches each stage's results in
`RUN_DIR/eval/<stage>.json` (a rerun only evaluates what is missing). Each result is
`{"score", "ci": [lo, hi], "n", "scores", "examples", "settings", "weights"}` (agent suites add
`outcomes`, each episode's first failing step counted, and write every episode to
`RUN_DIR/eval/<stage>/<suite>.jsonl`: arcforge.eval.failures), where `weights`
fingerprints the checkpoint's safetensors: evaluation is seeded, so a stage whose weights equal
an evaluated stage's (an RL stage whose every group had equal rewards makes no update) reuses
those results, marked `reused_from`, instead of running the suites again. `settings` records
what the score depends on besides the weights (the suite's n, turns, token and sampling
settings); a cached result whose settings differ from the config's is run again, so raising
`eval.n_per_suite` after a run re-evaluates that suite instead of reporting the old sample.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

import torch

from arcforge.config import EvalCfg
from arcforge.errors import UserError
from arcforge.eval.evaluator import load_evaluator
from arcforge.eval.suites import SUITES
from arcforge.progress import progress
from arcforge.stats import summarize


def is_external(name: str) -> bool:
    """An external benchmark (`bfcl:simple_python`, ...) rather than a world suite."""
    return ":" in name


def check_suites(names: list[str]) -> None:
    """Raise a UserError naming any suite that is not registered (world suites by name,
    external ones by prefix, arcforge.eval.external)."""
    from arcforge.eval.external import known_prefixes, parse_spec

    unknown = [s for s in names if not is_external(s) and s not in SUITES]
    if unknown:
        raise UserError(
            f"unknown eval suite(s) {unknown}; known: {sorted(SUITES)}, or an external "
            f"benchmark PREFIX:ARG with PREFIX one of {known_prefixes()}"
        )
    for s in names:
        if is_external(s) and parse_spec(s).prefix not in known_prefixes():
            raise UserError(f"unknown external suite {s!r}; prefixes: {known_prefixes()}")


def run_external(name: str, responder: Any, max_new_tokens: int) -> tuple[dict, list[dict]]:
    """One external suite scored by its own checker: (result in the matrix's shape, per-item
    records for the episodes file)."""
    from arcforge.eval.external import open_suite

    t0 = time.time()
    res = open_suite(name).run(responder)
    scores = [float(i.score) for i in res.items]
    result = {
        **summarize(scores),
        "ci": list(res.ci),
        "scores": [round(s, 6) for s in scores],
        "item_ids": [i.id for i in res.items],
        "baselines": res.baselines,
        "meta": res.meta,
        "examples": [{"id": i.id, "score": i.score, **i.detail} for i in res.items[:3]],
        "seconds": round(time.time() - t0, 2),
        "settings": {"max_new_tokens": max_new_tokens, "temperature": 0.0},
    }
    records = [{"id": i.id, "score": i.score, **i.detail} for i in res.items]
    return result, records


def weights_fingerprint(ckpt: Path) -> str:
    """sha256 over the checkpoint's safetensors files (names and bytes), in name order."""
    h = hashlib.sha256()
    for f in sorted(ckpt.glob("*.safetensors")):
        h.update(f.name.encode())
        with f.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def eval_settings(cfg: EvalCfg, suite: str) -> dict[str, Any]:
    """What a suite's score depends on besides the weights, as stored with each result."""
    return {
        "n": cfg.n_for(suite),
        "max_turns": cfg.max_turns,
        "max_new_tokens": cfg.max_new_tokens,
        "seed": cfg.seed,
        "temperature": cfg.temperature,
        "top_p": cfg.top_p,
        "samples": cfg.samples,
        "precision": cfg.precision,
    }


def _current(res: dict, cfg: EvalCfg, suite: str) -> bool:
    """Whether a cached result was computed with the config's settings. A result from before
    settings were stored counts when its sample size is the configured one."""
    if "settings" in res:
        return res["settings"] == eval_settings(cfg, suite)
    return res.get("n") == cfg.n_for(suite)


def _reusable(out_dir: Path, fingerprint: str, stage: str, cfg: EvalCfg) -> dict[str, dict]:
    """Results of other stages' caches computed on the same weights and settings."""
    found: dict[str, dict] = {}
    for f in sorted(out_dir.glob("*.json")):
        if f.stem == stage:
            continue
        for suite, res in json.loads(f.read_text()).items():
            if (
                res.get("weights") == fingerprint
                and suite not in found
                and _current(res, cfg, suite)
            ):
                found[suite] = {**res, "reused_from": res.get("reused_from", f.stem)}
    return found


def evaluate_checkpoint(
    ckpt: Path,
    world: Any,
    cfg: EvalCfg,
    suites: list[str] | None = None,
    desc: str = "eval",
    episodes_dir: Path | None = None,
) -> dict[str, dict]:
    """Run `suites` (default: cfg.suites) on one checkpoint; returns {suite: result}.

    Agent suites add `outcomes` (arcforge.eval.failures) to their result and, with
    `episodes_dir`, write every episode to `episodes_dir/<suite>.jsonl`."""
    names = suites or cfg.suites
    check_suites(names)
    torch.manual_seed(cfg.seed)
    ev = load_evaluator(ckpt, world, cfg.batch_size, cfg.precision)
    results: dict[str, dict] = {}
    with progress(len(names), desc) as bar:
        for i, name in enumerate(names):
            t0 = time.time()
            if is_external(name):
                from arcforge.eval.external.checkpoint_responder import CheckpointResponder

                responder = CheckpointResponder.from_loaded(
                    ev.model, ev.tokenizer, ev.engine, cfg.max_new_tokens, cfg.seed
                )
                results[name], records = run_external(name, responder, cfg.max_new_tokens)
                if episodes_dir is not None:
                    episodes_dir.mkdir(parents=True, exist_ok=True)
                    lines = "".join(json.dumps(r, default=str) + "\n" for r in records)
                    (episodes_dir / f"{name.replace('/', '_')}.jsonl").write_text(lines)
                bar.update(i + 1)
                continue
            out = SUITES[name](ev, cfg)
            results[name] = {
                **summarize(out.scores),
                "scores": [round(float(x), 6) for x in out.scores],  # per item, for paired deltas
                "examples": out.examples,
                "seconds": round(time.time() - t0, 2),
                "settings": eval_settings(cfg, name),
            }
            if out.outcomes is not None:
                results[name]["outcomes"] = out.outcomes
            if out.by_hops is not None:
                results[name]["by_hops"] = out.by_hops
            if out.clusters is not None:
                results[name]["clusters"] = out.clusters
            if episodes_dir is not None and out.episodes:
                episodes_dir.mkdir(parents=True, exist_ok=True)
                lines = "".join(json.dumps(e, default=str) + "\n" for e in out.episodes)
                (episodes_dir / f"{name}.jsonl").write_text(lines)
            bar.update(i + 1)
    return results


def evaluate_run(ctx: Any, only: list[str] | None = None) -> dict[str, dict[str, dict]]:
    """Evaluate every finished stage (or `only` those) of a run; cached per stage. A run that
    starts from a real checkpoint (`model.path`) also scores that checkpoint as stage `base`
    (`eval.base`), the point every stage's change is measured from."""
    out_dir = ctx.run_dir / "eval"
    out_dir.mkdir(exist_ok=True)
    results: dict[str, dict[str, dict]] = {}
    if ctx.cfg.eval.base and ctx.cfg.model.path and (not only or "base" in only):
        from arcforge.model.importer import REGISTRY, real_checkpoint

        path = ctx.cfg.model.path  # a directory, or a registered checkpoint's name
        base = real_checkpoint(path) if path in REGISTRY and not Path(path).exists() else Path(path)
        results["base"] = _evaluate_stage(ctx, "base", base, set(), out_dir)
    for stage in ctx.cfg.stages:
        if only and stage.name not in only or not stage.eval:
            continue
        if not (ctx.run_dir / stage.name / "DONE").exists():
            continue
        skip = set(getattr(stage, "eval_skip", []))
        results[stage.name] = _evaluate_stage(
            ctx, stage.name, ctx.checkpoint(stage.name), skip, out_dir
        )
    return results


def _evaluate_stage(ctx: Any, name: str, ckpt: Path, skip: set[str], out_dir: Path) -> dict:
    """One stage's results: cached ones kept, identical weights reused, the rest scored."""
    cache = out_dir / f"{name}.json"
    have = json.loads(cache.read_text()) if cache.exists() else {}
    cfg = ctx.cfg.eval
    missing = [
        s for s in cfg.suites if s not in skip and not (s in have and _current(have[s], cfg, s))
    ]
    if missing:
        fp = weights_fingerprint(ckpt)
        same = _reusable(out_dir, fp, name, cfg)
        reused = {s: same[s] for s in missing if s in same}
        if reused:
            src = sorted({r["reused_from"] for r in reused.values()})
            print(
                f"[eval {name}] weights identical to {', '.join(src)}: "
                f"reusing {len(reused)} suite result(s)"
            )
        have.update(reused)
        todo = [s for s in missing if s not in reused]
        if todo:
            new = evaluate_checkpoint(
                ckpt, ctx.world, cfg, todo, desc=f"eval {name}", episodes_dir=out_dir / name
            )
            have.update({s: {**r, "weights": fp} for s, r in new.items()})
        cache.write_text(json.dumps(have, indent=1))
    line = "  ".join(f"{s}={have[s]['score']:.3f}" for s in cfg.suites if s in have)
    print(f"[eval {name}] {line}")
    return have
