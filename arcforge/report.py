"""The run report: capability matrix, training curves and what each stage changed.

`write_report(run_dir)` reads only files the run wrote (stage DONE summaries, metrics.jsonl,
eval/<stage>.json, timing.json) and writes `report.json` (for tools), `report.md`,
`report.html` and PNG plots under `plots/`. Every number comes from the run; nothing is computed
that the run did not measure. The contamination check and the trivial baselines are the run's
audits (arcforge.audit.checks, run before the report), cached in checks/contamination.json and
checks/baselines.json; the report renders them when they are there. "Beyond the CI" means the
two stages' 95% intervals do not overlap.
"""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import yaml  # noqa: E402

from arcforge.errors import UserError  # noqa: E402
from arcforge.stats import LOWER_IS_BETTER, cluster_mean_ci, mean_ci  # noqa: E402


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]


def collect(run_dir: Path) -> dict[str, Any]:
    """Gather the run's measured results into the report.json structure."""
    cfg_path = run_dir / "config.yaml"
    if not cfg_path.exists():
        raise UserError(f"{run_dir} is not a run directory (no config.yaml)")
    cfg = yaml.safe_load(cfg_path.read_text())
    stages, matrix, items, outcomes, hops, clusters, arms = [], {}, {}, {}, {}, {}, {}
    listed = list(cfg.get("stages", []))
    if (run_dir / "eval" / "base.json").exists():  # the real checkpoint the run started from
        listed.insert(0, {"name": "base", "kind": "base"})
    for s in listed:
        name = s["name"]
        done = run_dir / name / "DONE"
        info = {"name": name, "kind": s["kind"], "done": done.exists() or s["kind"] == "base"}
        if done.exists():
            info.update(json.loads(done.read_text()))
        stages.append(info)
        ev = run_dir / "eval" / f"{name}.json"
        if ev.exists():
            for suite, r in json.loads(ev.read_text()).items():
                matrix.setdefault(suite, {})[name] = {
                    "score": r["score"],
                    "ci": r["ci"],
                    "n": r["n"],
                }
                if r.get("baselines"):  # external suites: their trivial baselines
                    matrix[suite][name]["baselines"] = r["baselines"]
                if r.get("scores"):
                    items.setdefault(suite, {})[name] = r["scores"]
                if r.get("clusters"):
                    clusters.setdefault(suite, {})[name] = r["clusters"]
                if r.get("outcomes"):
                    outcomes.setdefault(suite, {})[name] = r["outcomes"]
                if r.get("by_hops"):
                    hops.setdefault(suite, {})[name] = r["by_hops"]
                if r.get("reused_from"):
                    info.setdefault("eval_reused_from", r["reused_from"])
                comparison = (r.get("examples") or [{}])[0].get("comparison")
                if comparison:  # the swarm suite: both arms on the same items
                    arms.setdefault(suite, {})[name] = comparison
    timing = _read_json(run_dir / "timing.json") or {}
    for info in stages:
        if info["name"] in timing.get("eval_seconds", {}):
            info["eval_seconds"] = timing["eval_seconds"][info["name"]]
    contamination = _read_json(run_dir / "checks" / "contamination.json")
    baselines = _read_json(run_dir / "checks" / "baselines.json")
    moe = {}
    for info in stages:
        load = moe_load(_read_jsonl(run_dir / info["name"] / "metrics.jsonl"))
        if load:
            moe[info["name"]] = load
    return {
        "run": cfg.get("name", run_dir.name),
        "matrix": matrix,
        "stages": stages,
        "total_seconds": total_seconds(stages, timing, contamination, baselines),
        "setup_seconds": timing.get("setup_seconds"),
        "changes": changes(matrix, [s["name"] for s in stages], items, clusters),
        "forgetting": forgetting(matrix, stages),
        "outcomes": outcomes,
        "by_hops": hops,
        "arms": arms,
        "contamination": contamination,
        "baselines": baselines,
        "moe": moe,
    }


MOE_KEYS = ("moe_imbalance_max", "moe_imbalance_mean", "moe_idle_experts")


def moe_load(rows: list[dict[str, Any]]) -> dict[str, list[float]] | None:
    """A stage's MoE expert load (arcforge.model.moe.load_stats in its metric rows): the steps
    of its first and last row that has one, and each of `MOE_KEYS` at those two rows; None for
    a stage without MoE metrics."""
    logged = [r for r in rows if all(k in r for k in MOE_KEYS)]
    if not logged:
        return None
    first, last = logged[0], logged[-1]
    out = {"steps": [first["step"], last["step"]]}
    out.update({k: [first[k], last[k]] for k in MOE_KEYS})
    return out


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text()) if path.exists() else None


def total_seconds(stages: list[dict], timing: dict, *checks: dict | None) -> float:
    """The run's measured wall seconds: world and tokenizer setup, every stage's training and
    its evaluation, and the contamination / baseline checks. A stage resumed after a kill
    counts its last session; the report's own writing is not counted."""
    total = float(timing.get("setup_seconds") or 0.0)
    for s in stages:
        total += float(s.get("seconds") or 0.0) + float(s.get("eval_seconds") or 0.0)
    return total + sum(float(c.get("seconds") or 0.0) for c in checks if c)


def changes(
    matrix: dict[str, dict[str, dict]],
    order: list[str],
    items: dict[str, dict[str, list[float]]] | None = None,
    clusters: dict[str, dict[str, list[str]]] | None = None,
) -> list[dict[str, Any]]:
    """Each stage versus the previous evaluated stage, per suite.

    Every stage is scored on the same held-out items (and the same sampling seeds), so when the
    per-item scores of both stages are known the change gets a paired 95% interval: the mean of
    the per-item differences ± 1.96 SE, much tighter than two independent intervals, and
    `beyond_ci` means that interval excludes 0. Without per-item scores (older caches) it falls
    back to the two score intervals not overlapping. `intervals_overlap` is reported either way.
    Where items share a reference solution (`clusters`, the same in both stages: the code
    suite's held-out functions, each asked several times) the interval is cluster-robust
    (`stats.cluster_mean_ci`) and `clustered` is set.
    """
    items, clusters = items or {}, clusters or {}
    out = []
    for suite, by_stage in matrix.items():
        seq = [s for s in order if s in by_stage]
        for a, b in zip(seq, seq[1:]):
            ra = {
                **by_stage[a],
                "scores": items.get(suite, {}).get(a),
                "clusters": clusters.get(suite, {}).get(a),
            }
            rb = {
                **by_stage[b],
                "scores": items.get(suite, {}).get(b),
                "clusters": clusters.get(suite, {}).get(b),
            }
            out.append({"suite": suite, "from": a, "to": b, **paired_change(suite, ra, rb)})
    return out


def paired_change(suite: str, ra: dict[str, Any], rb: dict[str, Any]) -> dict[str, Any]:
    """The change from result `ra` to `rb` of one suite (each {"score", "ci"}, optionally the
    per-item "scores" and "clusters" an eval writes): a paired interval over the per-item
    differences when both have them (cluster-robust when both name the same clusters), else
    whether the two score intervals do not overlap."""
    delta = rb["score"] - ra["score"]
    overlap = not (rb["ci"][0] > ra["ci"][1] or rb["ci"][1] < ra["ci"][0])
    xa, xb = ra.get("scores"), rb.get("scores")
    ca, cb = ra.get("clusters"), rb.get("clusters")
    delta_ci, clustered = None, False
    if xa and xb and len(xa) == len(xb) > 1:
        diffs = [y - x for x, y in zip(xa, xb)]
        clustered = bool(ca) and ca == cb and len(ca) == len(diffs)
        _, lo, hi = cluster_mean_ci(diffs, ca) if clustered else mean_ci(diffs)
        delta_ci = [lo, hi]
        sep = lo > 0 or hi < 0
    else:
        sep = not overlap
    better = (delta < 0) if suite in LOWER_IS_BETTER else (delta > 0)
    return {
        "delta": delta,
        "delta_ci": delta_ci,
        "paired": delta_ci is not None,
        "clustered": clustered,
        "intervals_overlap": overlap,
        "beyond_ci": sep,
        "improved": better and sep,
    }


def _gain(suite: str, a: float, b: float) -> float:
    """How much better b is than a (signs flipped for lower-is-better suites)."""
    return a - b if suite in LOWER_IS_BETTER else b - a


def forgetting(matrix: dict[str, dict[str, dict]], stages: list[dict]) -> list[dict[str, Any]]:
    """Per suite: the best earlier stage versus the current one, and what distillation recovered.

    "current" is the last evaluated stage that is not a distillation stage (e.g. general RL);
    "best" the best-scoring stage before it; forgot = how much worse current is than best
    (negative: no forgetting); with a distillation stage after current, recovered = how much
    better its score is than current's. `beyond_ci`: the two 95% intervals do not overlap.
    """
    kinds = {s["name"]: s["kind"] for s in stages}
    out = []
    for suite, by in matrix.items():
        seq = [s["name"] for s in stages if s["name"] in by]
        plain = [n for n in seq if kinds[n] != "distill"]
        if not plain or seq.index(plain[-1]) == 0:
            continue
        cur = plain[-1]
        earlier = seq[: seq.index(cur)]
        best = max(earlier, key=lambda n: _gain(suite, 0.0, by[n]["score"]))
        rb, rc = by[best], by[cur]
        row: dict[str, Any] = {
            "suite": suite,
            "best_stage": best,
            "best": rb["score"],
            "current_stage": cur,
            "current": rc["score"],
            "forgot": _gain(suite, rc["score"], rb["score"]),
            "forgot_beyond_ci": rc["ci"][1] < rb["ci"][0] or rc["ci"][0] > rb["ci"][1],
            "final_stage": None,
            "final": None,
            "recovered": None,
        }
        after = [n for n in seq[seq.index(cur) + 1 :] if kinds[n] == "distill"]
        if after:
            fin = after[-1]
            row.update(
                final_stage=fin,
                final=by[fin]["score"],
                recovered=_gain(suite, rc["score"], by[fin]["score"]),
            )
        out.append(row)
    return out


def _plot_curves(run_dir: Path, stages: list[dict], plots: Path) -> list[str]:
    made = []
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.8))
    offset, any_train, any_held = 0, False, False
    for s in stages:
        rows = _read_jsonl(run_dir / s["name"] / "metrics.jsonl")
        tr = [(r["step"] + offset, r["loss"]) for r in rows if "loss" in r]
        ho = [(r["step"] + offset, r["heldout_loss"]) for r in rows if "heldout_loss" in r]
        if tr:
            ax1.plot(*zip(*tr), label=s["name"])
            any_train = True
        if ho:
            ax2.plot(*zip(*ho), marker="o", ms=3, label=s["name"])
            any_held = True
        last = max([r.get("step", 0) for r in rows] or [0])
        offset += last
    if any_train or any_held:
        ax1.set(title="training loss", xlabel="step (cumulative)", ylabel="loss")
        ax2.set(title="held-out LM loss", xlabel="step (cumulative)", ylabel="loss")
        for ax in (ax1, ax2):
            if ax.lines:
                ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(plots / "loss.png", dpi=110)
        made.append("loss.png")
    plt.close(fig)
    return made


def _smooth(ys: list[float], w: int) -> list[float]:
    """Trailing moving average over `w` points (fewer at the start)."""
    return [
        sum(ys[max(0, i - w + 1) : i + 1]) / (i + 1 - max(0, i - w + 1)) for i in range(len(ys))
    ]


def _rl_series(rows: list[dict]) -> tuple[str, dict[str, list[tuple[int, float]]]] | None:
    """(y label, {line: [(step, value)]}) of an RL stage (reward_mean and each reward_<pool>)
    or a distillation stage (kl_to_teacher and each kl_<teacher>); None for other stages."""
    series = (("reward_mean", "reward_", "reward"), ("kl_to_teacher", "kl_", "KL to teacher"))
    found = next((x for x in series if any(x[0] in r for r in rows)), None)
    if found is None:
        return None
    lead, prefix, ylabel = found
    keys = sorted({k for r in rows for k in r if k.startswith(prefix) and k != lead})
    lines = {lead: [(r["step"], r[lead]) for r in rows if lead in r]}
    for k in keys:
        pts = [(r["step"], r[k]) for r in rows if isinstance(r.get(k), (int, float))]
        if pts:
            lines[k.removeprefix(prefix)] = pts
    return ylabel, lines


def _plot_rl(run_dir: Path, stages: list[dict], plots: Path) -> list[str]:
    """One panel per RL or distillation stage: its reward (or KL) per step, smoothed, with one
    line per task pool (agentic RL) or teacher (distillation) next to the overall mean, and
    agentic RL's dev-set probe scores (greedy success per suite) with its kept step marked."""
    panels = []
    for s in stages:
        got = _rl_series(_read_jsonl(run_dir / s["name"] / "metrics.jsonl"))
        if got:
            panels.append((s["name"], *got))
    if not panels:
        return []
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.4), squeeze=False)
    summaries = {s["name"]: s for s in stages}  # with each finished stage's DONE summary
    for ax, (name, ylabel, lines) in zip(axes[0], panels):
        for i, (label, pts) in enumerate(lines.items()):
            xs, ys = zip(*pts)
            w = max(1, len(ys) // 8)
            style = {"lw": 2.2, "color": "black"} if i == 0 else {"lw": 1.2}
            ax.plot(xs, _smooth(list(ys), w), label=label, **style)
            if i == 0:
                ax.plot(xs, ys, lw=0.6, color="black", alpha=0.3)
        probes = _read_jsonl(run_dir / name / "probe.jsonl")  # agentic RL's dev-set probe
        for k in sorted({k for r in probes for k in r if k.startswith("probe_")}):
            pts = [(r["step"], r[k]) for r in probes if k in r]
            ax.plot(*zip(*pts), "o--", lw=1.0, ms=3, label=f"dev {k.removeprefix('probe_')}")
        kept = summaries[name].get("kept_step")  # the step the stage ended on
        if probes and kept is not None:
            ax.axvline(kept, color="grey", ls=":", lw=1.0, label=f"kept step {kept}")
        ax.set(title=f"{name} (moving mean)", xlabel="step", ylabel=ylabel)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(plots / "rl.png", dpi=110)
    plt.close(fig)
    return ["rl.png"]


def _plot_matrix(matrix: dict, order: list[str], plots: Path) -> list[str]:
    suites = [s for s in matrix if s not in LOWER_IS_BETTER]
    cols = [s for s in order if any(s in matrix[x] for x in suites)]
    if not suites or not cols:
        return []
    data = [[matrix[s].get(c, {}).get("score", float("nan")) for c in cols] for s in suites]
    fig, ax = plt.subplots(figsize=(1.4 + 1.1 * len(cols), 0.9 + 0.5 * len(suites)))
    im = ax.imshow(data, vmin=0, vmax=1, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(cols)), cols, rotation=30, ha="right")
    ax.set_yticks(range(len(suites)), suites)
    for i, row in enumerate(data):
        for j, v in enumerate(row):
            if v == v:
                ax.text(
                    j,
                    i,
                    f"{v:.2f}",
                    ha="center",
                    va="center",
                    color="white" if v < 0.6 else "black",
                    fontsize=8,
                )
    fig.colorbar(im, ax=ax, fraction=0.03)
    ax.set_title("capability matrix (score per suite × stage checkpoint)")
    fig.tight_layout()
    fig.savefig(plots / "matrix.png", dpi=110)
    plt.close(fig)
    return ["matrix.png"]


def _arm_cell(r: dict | None) -> str:
    """One arm of the swarm suite: accuracy, item accuracy, mean critical and total steps."""
    if not r:
        return "–"
    return (
        f"acc {r['accuracy']:.3f}, items {r['item_acc']:.3f}, "
        f"critical steps {r['critical_steps']:.1f} (total {r['total_steps']:.1f})"
    )


def _fmt(r: dict | None, suite: str) -> str:
    if not r:
        return "–"
    return f"{r['score']:.3f} [{r['ci'][0]:.2f}, {r['ci'][1]:.2f}] (n={r['n']})"


def render_markdown(rep: dict, plots: list[str]) -> str:
    order = [s["name"] for s in rep["stages"]]
    cols = [s for s in order if any(s in v for v in rep["matrix"].values())]
    lines = [f"# arcforge report: {rep['run']}"] + _table_head(
        "Capability matrix",
        "Score with 95% CI and n per suite (rows) and stage checkpoint (columns). "
        "`lm_loss` is a held-out loss: lower is better. `contam.`: the share of the suite's "
        "held-out items whose reference has at least half of its 13-token windows in training "
        "text, then test prompts duplicated in the train split / in training text "
        "(arcforge.audit.contamination; * expected by design, reason below). Under each row: "
        "the trivial baselines on the same items, scored like the suite (majority: the most "
        "common train reference for every item; nearest: the reference of the most similar "
        "train prompt; external benchmarks: their own, e.g. BFCL's never-call); a stage's score "
        "is read against them. 🟢 / 🔴: better / worse than the previous evaluated stage beyond "
        "the paired 95% CI of the change.",
        ["suite", "contam.", *cols],
    )
    cont = (rep.get("contamination") or {}).get("suites", {})
    base = (rep.get("baselines") or {}).get("suites", {})
    marks = {
        (c["suite"], c["to"]): ("🟢 " if c["improved"] else "🔴 ")
        for c in rep["changes"]
        if c["beyond_ci"]
    }
    for suite, by in rep["matrix"].items():
        cells = " | ".join(marks.get((suite, c), "") + _fmt(by.get(c), suite) for c in cols)
        lines.append(f"| {suite} | {_contam_cell(cont, suite)} | {cells} |")
        b = _baseline_cell(base, suite) or _external_baselines(by)
        if b:
            lines.append(f"| ↳ baselines | | {b} |" + " |" * (len(cols) - 1))
        for arm in ("swarm", "single"):
            by_arm = (rep.get("arms") or {}).get(suite, {})
            if any(arm in by_arm.get(c, {}) for c in cols):
                cells = " | ".join(_arm_cell(by_arm.get(c, {}).get(arm)) for c in cols)
                lines.append(f"| ↳ {arm} | | {cells} |")
    lines += _expected_md(cont, rep["matrix"])
    for s in rep["stages"]:
        if s.get("eval_reused_from"):
            lines += [
                "",
                f"`{s['name']}` ended with weights identical to `{s['eval_reused_from']}` "
                "(it made no update), so its column reuses those results.",
            ]
    lines += [
        "",
        "## What each stage changed",
        "",
        "Δ 95% CI is paired (per-item differences on the same held-out items and seeds) where "
        "the per-item scores are known; otherwise a change counts when the two intervals do not "
        "overlap. ᶜ: cluster-robust, where several items share one reference solution (the code "
        "suite asks each held-out function several times).",
        "",
        "| suite | from → to | Δ score | Δ 95% CI | beyond 95% CI | improved |",
        "|---|---|---|---|---|---|",
    ]
    for c in rep["changes"]:
        dci = c.get("delta_ci")
        dci_s = f"[{dci[0]:+.3f}, {dci[1]:+.3f}]" if dci else "unpaired"
        dci_s += "ᶜ" if c.get("clustered") else ""
        lines.append(
            f"| {c['suite']} | {c['from']} → {c['to']} | {c['delta']:+.3f} | {dci_s} | "
            f"{'yes' if c['beyond_ci'] else 'no'} | "
            f"{('🟢 yes' if c['improved'] else '🔴 no') if c['beyond_ci'] else 'no'} |"
        )
    lines += _forgetting_md(rep.get("forgetting", []))
    lines += _outcomes_md(rep.get("outcomes", {}), order)
    lines += _hops_md(rep.get("by_hops", {}), order)
    lines += _moe_md(rep.get("moe", {}), order)
    lines += _contamination_md(rep.get("contamination"), rep.get("baselines"))
    total = rep.get("total_seconds")
    lines += [
        "",
        "## Stages",
        "",
        f"Wall time measured: {total:.0f} s in all (setup "
        f"{rep.get('setup_seconds') or 0:.0f} s, every stage's training and evaluation, "
        "the contamination and baseline checks)."
        if total
        else "No timing recorded.",
        "",
        "| stage | kind | seconds | eval seconds | summary |",
        "|---|---|---|---|---|",
    ]
    for s in rep["stages"]:
        extra = {
            k: v
            for k, v in s.items()
            if k not in ("name", "kind", "done", "stage", "seconds", "eval_seconds")
        }
        summ = ", ".join(
            f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
            for k, v in extra.items()
            if not isinstance(v, dict | list)
        )
        secs = f"{s['seconds']:.0f}" if "seconds" in s else "not run"
        ev = f"{s['eval_seconds']:.0f}" if "eval_seconds" in s else "–"
        lines.append(f"| {s['name']} | {s['kind']} | {secs} | {ev} | {summ} |")
    if plots:
        lines += ["", "## Plots", ""] + [f"![{p}](plots/{p})" for p in plots]
    return "\n".join(lines) + "\n"


def _check_suite(suite: str) -> str | None:
    """The exported suite (arcforge.audit.export) an eval suite's items come from."""
    from arcforge.audit.export import EVAL_TO_SUITE

    return EVAL_TO_SUITE.get(suite)


# eval suites scored the way the baselines are (a final answer or an executed solution)
BASELINE_SUITES = (
    "reasoning",
    "reasoning_greedy",
    "tir",
    "tir_avg",
    "tool",
    "tool_avg",
    "search",
    "search_avg",
    "chat",
    "long_context",
    "code",
    "code_avg",
    "terminal",
    "terminal_avg",
    "swe",
    "swe_avg",
    "explore",
)


def _contam_cell(cont: dict, suite: str) -> str:
    r = cont.get(_check_suite(suite) or "") or (cont.get(suite) if ":" in suite else None)
    if r and r.get("unchecked"):
        return "unchecked"
    if not r:
        return "–"
    mark = "*" if r.get("expected") else ""
    return f"{r['share']:.2f}{mark} ({r['dup_train_test']}/{r['dup_in_training']})"


def _external_baselines(by: dict) -> str:
    """An external suite's own trivial baselines (the same items at every stage)."""
    b = next((r["baselines"] for r in by.values() if r.get("baselines")), None)
    return " · ".join(f"{k} {v:.3f}" for k, v in b.items()) if b else ""


def _baseline_cell(base: dict, suite: str) -> str:
    r = base.get(_check_suite(suite) or "") if suite in BASELINE_SUITES else None
    if not r:
        return ""
    how = f"n={r['n']}, executed" if r.get("executed") else f"n={r['n']}"
    return f"majority {r['majority']:.3f} · nearest {r['nearest']:.3f} ({how})"


def _expected_md(cont: dict, matrix: dict) -> list[str]:
    """Why a suite's contamination is expected by design, for the suites in the matrix."""
    shown = dict.fromkeys(s for s in map(_check_suite, matrix) if s)
    notes = [f"- \\* {s}: {cont[s]['expected']}" for s in shown if cont.get(s, {}).get("expected")]
    return ["", *notes] if notes else []


def _contamination_md(cont: dict | None, base: dict | None) -> list[str]:
    """Every checked suite's contamination figures and baselines (also those no eval scores)."""
    if not cont and not base:
        return []
    cs, bs = (cont or {}).get("suites", {}), (base or {}).get("suites", {})
    out = _table_head(
        "Contamination and baselines",
        "Per suite of the world: held-out items checked, the share whose reference has at "
        "least half of its 13-token windows in training text (regex word/punctuation tokens; "
        "a reference under 13 tokens: its whole token sequence), test prompts that are train "
        "prompts, test prompts found whole in training text, and the two baselines "
        "(executed suites: the first n items). External benchmark suites (`prefix:arg`) are "
        "checked on the items they score; for BFCL, `expected because` also counts items whose "
        "function names all occur in training text.",
        [
            "suite",
            "n",
            "contaminated",
            "dup train/test",
            "dup in training text",
            "majority",
            "nearest",
            "expected because",
        ],
    )
    for s in dict.fromkeys([*cs, *bs]):
        c, b = cs.get(s), bs.get(s)
        if c and c.get("unchecked"):
            out.append(f"| {s} | – | – | – | – | – | – | unchecked: {c['unchecked']} |")
            continue
        cells = (
            [str(c["n"]), f"{c['share']:.2f}", str(c["dup_train_test"]), str(c["dup_in_training"])]
            if c
            else ["–"] * 4
        )
        cells += [f"{b['majority']:.3f} (n={b['n']})", f"{b['nearest']:.3f}"] if b else ["–"] * 2
        note = (c or {}).get("expected") or ""
        if c and "names_in_training" in c:
            note = f"function names in training text: {c['names_in_training']}/{c['n']}"
        cells.append(note)
        out.append(f"| {s} | " + " | ".join(cells) + " |")
    return out


def _table_head(title: str, text: str, cols: list[str]) -> list[str]:
    """A report section's heading, its explanation and a markdown table's header rows."""
    return [
        "",
        f"## {title}",
        "",
        text,
        "",
        "| " + " | ".join(cols) + " |",
        "|---" * len(cols) + "|",
    ]


def _outcomes_md(outcomes: dict[str, dict[str, dict[str, int]]], order: list[str]) -> list[str]:
    """Agent suites: how each stage's greedy episodes ended (their first failing step)."""
    from arcforge.eval.failures import OUTCOMES

    if not outcomes:
        return []
    out = _table_head(
        "Where agent episodes fail",
        "Each held-out episode counted once, under its first failing step (arcforge.eval.failures); "
        "the episodes are in `eval/<stage>/<suite>.jsonl`.",
        ["suite", "stage", *OUTCOMES],
    )
    for suite, by in outcomes.items():
        for stage in [s for s in order if s in by]:
            cells = " | ".join(str(by[stage].get(k, 0)) for k in OUTCOMES)
            out.append(f"| {suite} | {stage} | {cells} |")
    return out


def _hops_md(hops: dict[str, dict[str, dict[str, list[int]]]], order: list[str]) -> list[str]:
    """Tool and search suites: solved of n per hop count, per stage."""
    if not hops:
        return []
    counts = sorted({h for by in hops.values() for st in by.values() for h in st}, key=int)
    out = _table_head(
        "Agent suites by hop count",
        "Solved / n held-out questions per number of hops (lookups or searches the question "
        "needs); 0 hops: arithmetic only.",
        ["suite", "stage", *(f"{h} hops" for h in counts)],
    )
    for suite, by in hops.items():
        for stage in [s for s in order if s in by]:
            cells = " | ".join(
                f"{by[stage][h][0]}/{by[stage][h][1]}" if h in by[stage] else "–" for h in counts
            )
            out.append(f"| {suite} | {stage} | {cells} |")
    return out


def _moe_md(moe: dict[str, dict[str, list[float]]], order: list[str]) -> list[str]:
    """MoE stages: expert-load imbalance and idle experts at the first and last logged step."""
    if not moe:
        return []
    out = _table_head(
        "MoE expert load",
        "Per training stage of an MoE model, at its first → last logged step (the tokens of "
        "that step's training forwards): max / mean load per expert over the mean load (1.0 is "
        "perfectly balanced), the worst layer and the mean over layers, and the experts that got "
        "no token, summed over layers.",
        ["stage", "steps", "imbalance (max layer)", "imbalance (mean)", "idle experts"],
    )
    for stage in [s for s in order if s in moe]:
        m = moe[stage]
        cells = [f"{m['steps'][0]} → {m['steps'][1]}"]
        cells += [f"{m[k][0]:.2f} → {m[k][1]:.2f}" for k in MOE_KEYS[:2]]
        cells.append(f"{m['moe_idle_experts'][0]:.0f} → {m['moe_idle_experts'][1]:.0f}")
        out.append(f"| {stage} | " + " | ".join(cells) + " |")
    return out


def _forgetting_md(rows: list[dict]) -> list[str]:
    if not rows:
        return []
    out = [
        "",
        "## Forgetting",
        "",
        "Best earlier stage versus the current one (the last non-distillation stage), and what "
        "distillation recovered. Forgot > 0: the current stage is worse (lm_loss: higher).",
        "",
        "| suite | best earlier | current | forgot | beyond 95% CI | after distillation | "
        "recovered |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        fin = "–" if r["final_stage"] is None else f"{r['final']:.3f} ({r['final_stage']})"
        rec = "–" if r["recovered"] is None else f"{r['recovered']:+.3f}"
        out.append(
            f"| {r['suite']} | {r['best']:.3f} ({r['best_stage']}) | "
            f"{r['current']:.3f} ({r['current_stage']}) | {r['forgot']:+.3f} | "
            f"{'yes' if r['forgot_beyond_ci'] else 'no'} | {fin} | {rec} |"
        )
    return out


def render_html(md: str, plots: Path, names: list[str]) -> str:
    body = []
    table: list[str] = []
    for ln in md.splitlines() + [""]:
        if ln.startswith("|"):
            if not set(ln) <= set("|-: "):
                table.append(ln)
            continue
        if table:
            rows = [[html.escape(c.strip()) for c in r.strip("|").split("|")] for r in table]
            head = "".join(f"<th>{c}</th>" for c in rows[0])
            trs = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows[1:])
            body.append(f"<table><tr>{head}</tr>{trs}</table>")
            table = []
        if ln.startswith("!["):
            continue
        if ln.startswith("#"):
            level = len(ln) - len(ln.lstrip("#"))
            body.append(f"<h{level}>{html.escape(ln.lstrip('# '))}</h{level}>")
        elif ln.strip():
            body.append(f"<p>{html.escape(ln)}</p>")
    for n in names:
        data = base64.b64encode((plots / n).read_bytes()).decode()
        body.append(f'<p><img alt="{n}" src="data:image/png;base64,{data}"></p>')
    style = (
        "body{font-family:sans-serif;max-width:1100px;margin:2em auto}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px}"
    )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><style>{style}</style></head>"
        f"<body>{''.join(body)}</body></html>"
    )


def write_report(run_dir: str | Path) -> Path:
    """Write report.json / report.md / report.html / plots for a run; returns report.md."""
    run_dir = Path(run_dir)
    rep = collect(run_dir)
    plots = run_dir / "plots"
    plots.mkdir(exist_ok=True)
    names = _plot_curves(run_dir, rep["stages"], plots)
    names += _plot_rl(run_dir, rep["stages"], plots)
    names += _plot_matrix(rep["matrix"], [s["name"] for s in rep["stages"]], plots)
    (run_dir / "report.json").write_text(json.dumps(rep, indent=1))
    md = render_markdown(rep, names)
    (run_dir / "report.md").write_text(md)
    (run_dir / "report.html").write_text(render_html(md, plots, names))
    return run_dir / "report.md"
