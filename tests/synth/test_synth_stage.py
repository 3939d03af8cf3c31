"""The `synth` pipeline stage on a small world: synthetic SWE bugs in a world repository, an RL
pool the `jsonl:` source reads back, and config errors named."""

from __future__ import annotations

import pytest

from arcforge.data.sources import load_records
from arcforge.errors import ConfigError
from arcforge.pipeline import RunContext, run_stage
from arcforge.run_config import parse_config
from arcforge.sandbox.bwrap import bwrap_available
from arcforge.synth.abe import DECOMPOSE_PROMPT

pytestmark = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap cannot run here")


def _run_synth(run_dir, replay=None, **stage):
    """Run one `synth` stage (its fields: `stage`; `replay`: a ReplayServer as its LLM) on the
    seed-3, scale-0.1 world in `run_dir`; returns the run context and the stage's summary."""
    if replay is not None:
        stage["llm"] = {"base_url": replay.base_url, "api_key_env": None}
    raw = {
        "name": "t",
        "world": {"seed": 3, "scale": 0.1},
        "stages": [{"name": "synth", "kind": "synth", **stage}],
    }
    cfg = parse_config(raw)
    ctx = RunContext(cfg, run_dir)
    return ctx, run_stage(ctx, cfg.stages[0])


@pytest.mark.slow
def test_synth_stage_on_world_repos(tmp_path):
    import arcforge.stages  # noqa: F401  (registers the stage kinds)
    from arcforge.world.code.pysource import WORLD_SWE_TOOLS

    ctx, summary = _run_synth(tmp_path, swe_repos=1, swe_bugs=3, runs=1)
    [repo] = summary["swe"]  # swe_repos=1: one train-split repo
    assert repo in {r.name for r in ctx.world.repos}
    counts = summary["swe"][repo]
    assert counts["mutants"]["out"] == 3 and counts["validate"]["in"] == 3
    assert summary["swe_instances"] == counts["statement"]["out"] >= 1
    recs = load_records(f"jsonl:{tmp_path / 'synth' / 'rl_pool.jsonl'}")
    assert len(recs) == summary["swe_instances"]
    task = recs[0].task
    assert task.kind == "swe" and task.validation.fail_to_pass
    assert task.metadata["env"]["kind"] == "swe"
    assert task.tools == list(WORLD_SWE_TOOLS)  # the tools SFT's SWE episodes used
    assert (tmp_path / "synth" / "DONE").exists()


def test_synth_stage_config_errors():
    import arcforge.stages  # noqa: F401

    with pytest.raises(ConfigError, match="unknown key 'stages\\[0\\].swe_bug'"):
        parse_config({"stages": [{"name": "s", "kind": "synth", "swe_bug": 2}]})
    with pytest.raises(ConfigError, match="stages\\[0\\].runs"):
        parse_config({"stages": [{"name": "s", "kind": "synth", "runs": 0}]})


def test_synth_stage_runs_search_and_gem_through_one_llm(tmp_path):
    """Search (triple extraction, no-tool filter, paraphrase), GEM's and ABE's LLM routes all
    reach the configured endpoint (a scripted OpenAI-compatible server: the remote LLM we do
    not own)."""
    import arcforge.stages  # noqa: F401
    from arcforge.replay import ReplayServer

    def llm(messages):
        if messages[0]["content"].startswith("Rewrite"):
            return "Could you tell me: " + messages[-1]["content"]
        return "I do not know."  # no-tool answers are wrong; GEM gets unusable JSON

    with ReplayServer(llm) as srv:
        _, summary = _run_synth(
            tmp_path, srv, swe_repos=0, search=2, gem_texts=2, abe=2, search_llm_pages=2
        )
        systems = [r["messages"][0]["content"] for r in srv.requests]
    search = summary["search"]
    assert search["kept"] == 2 and search["steps"]["no_tool"]["in"] >= 2
    assert search["info"].get("paraphrased", 0) >= 1
    out = tmp_path / "synth"
    assert len((out / "search" / "tasks.jsonl").read_text().splitlines()) == 2
    assert summary["gem"]["in"] == 2 and summary["gem"]["kept"] == 0  # garbage is dropped
    assert any(s.startswith("Rewrite") for s in systems) and len(systems) > 4
    assert summary["abe"]["steps"]["draft"]["in"] == 2 and summary["abe"]["kept"] == 0
    assert DECOMPOSE_PROMPT in systems  # ABE's LLM route asked the same endpoint
    assert "engine_two_search_runs" not in search["info"]  # a remote model: no token-level agent
    assert search["graph"]["free_text_pages"] >= 2  # two of them went to the LLM extractor,
    assert search["graph"]["llm_unparsable"] == 2  # whose non-JSON replies are counted
    assert summary["swe_instances"] == 0 and (out / "rl_pool.jsonl").exists()


def test_served_checkpoint_also_runs_the_two_search_agent(tmp_path, tok):
    """With `llm.checkpoint`, the synth stage serves that model in-process and also runs it as
    a search agent through the completions API: questions it would answer within 2 searches are
    dropped. (A random nano model answers none; what is checked is that every surviving
    question went through it.)"""
    import arcforge.stages  # noqa: F401
    from arcforge.model.checkpoint import init_model, save_checkpoint
    from arcforge.model.presets import build_config

    model = init_model(build_config("nano", vocab_size=len(tok), max_position_embeddings=2048), 0)
    ckpt = save_checkpoint(model, tok, tmp_path / "ckpt")
    _, out = _run_synth(tmp_path / "run", swe_repos=0, search=1, llm={"checkpoint": str(ckpt)})
    summary = out["search"]
    steps = summary["steps"]
    assert steps["two_search"]["in"] >= 1
    solved = steps["two_search"]["dropped"].get("two_search_solved", 0)
    assert summary["info"]["engine_two_search_runs"] == steps["two_search"]["in"] - solved
    assert summary["kept"] == 1


def test_synth_stage_sends_swe_statements_and_howto_pages_to_the_llm(tmp_path):
    """`swe_llm_rewrite` routes each synthetic bug's statement through the LLM (a rewrite
    keeping the code name is used, one that leaks a test name is not) and `terminal_pages`
    sends the world's how-to pages through terminal synthesis's web-page route."""
    import re

    import arcforge.stages  # noqa: F401
    from arcforge.replay import ReplayServer

    def llm(messages):
        text = messages[-1]["content"]
        if text.startswith("Rewrite the following change"):
            test = re.search(r"::(test_\w+)", text)
            if test and llm.n_swe == 0:
                llm.n_swe += 1
                return "A library function gives wrong results for some inputs."
            return f"It fails in {test.group(1) if test else 'a test'} - please fix."
        return "not json"  # page drafts: unusable, dropped and counted

    llm.n_swe = 0
    with ReplayServer(llm) as srv:
        swe = dict(swe_repos=1, swe_bugs=4, runs=1, swe_llm_rewrite=True)
        ctx, summary = _run_synth(tmp_path, srv, **swe, terminal_pages=2, terminal_seeds=1)
        prompts = [r["messages"][-1]["content"] for r in srv.requests]
    page_prompts = [p for p in prompts if "technical web page" in p]
    assert len(page_prompts) == 2 and "```bash" in page_prompts[0] and "Step 2." in page_prompts[0]
    term = summary["terminal"]
    assert term["draft"]["dropped"] == {"page LLM failed": 2}  # not JSON
    # the seed's expansion failed too, but the seed itself went on to the construction agent
    assert term["seed_expansion"] == {"expansion LLM failed": 1} and term["draft"]["out"] == 1
    assert term["construct"] == {"in": 1, "out": 0, "dropped": {"construction LLM failed": 1}}
    assert sum(p.startswith("Build an executable, verifiable terminal task") for p in prompts) >= 1
    train_repos = [r for r in ctx.world.repos if r.split == "train"]  # never a held-out repo
    assert set(summary["swe"]) == {train_repos[0].name}
    counts = summary["swe"][train_repos[0].name]
    rewrites = counts["statement_rewrite"]
    assert sum(rewrites.values()) == summary["swe_instances"] >= 1
    assert rewrites.get("accepted", 0) == 1
    if summary["swe_instances"] > 1:
        assert rewrites["rejected: names a FAIL_TO_PASS test"] == summary["swe_instances"] - 1
    insts = load_records(f"jsonl:{tmp_path / 'synth' / 'rl_pool.jsonl'}")
    statements = [r.task.instruction for r in insts if r.task.kind == "swe"]
    assert sum("gives wrong results for some inputs" in s for s in statements) == 1
    assert not any("please fix" in s for s in statements)  # the leaking rewrite was not used
