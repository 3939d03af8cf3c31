"""Config loading: typed stages, overrides, and errors that name the key and the file."""

import subprocess
import sys
from pathlib import Path

import pytest

from arcforge.errors import ConfigError
from arcforge.run_config import load_config
from arcforge.stages.lm import LMStageCfg
from arcforge.stages.sft import SFTStageCfg

ROOT = Path(__file__).resolve().parents[2]

BASE = """
name: t
model: {preset: tiny}
stages:
  - {name: pre, kind: pretrain, sources: [{source: "world:corpus"}], tokens: 1000}
  - {name: tune, kind: sft, sources: [{source: "world:sft"}]}
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "c.yaml"
    p.write_text(text)
    return p


def test_stages_are_typed_by_kind(tmp_path):
    cfg = load_config(write(tmp_path, BASE))
    assert isinstance(cfg.stages[0], LMStageCfg)
    assert isinstance(cfg.stages[1], SFTStageCfg)
    assert cfg.stages[1].optim.lr == 1e-3  # the SFT default, not the LM default


def test_overrides_by_stage_name_and_nested_key(tmp_path):
    cfg = load_config(
        write(tmp_path, BASE),
        ["stages.tune.optim.lr=5e-5", "model.preset=small", "stages.0.seq_len=64"],
    )
    assert cfg.stage("tune").optim.lr == 5e-5
    assert cfg.model.preset == "small"
    assert cfg.stage("pre").seq_len == 64


@pytest.mark.parametrize(
    "text, key",
    [
        (BASE.replace("preset: tiny", "preset: tiny, presett: x"), "model.presett"),
        (BASE.replace("tokens: 1000", "tokens: lots"), "stages[0].tokens"),
        (BASE.replace("kind: sft", "kind: sfft"), "stages[1].kind"),
        (BASE + "evall: {}\n", "evall"),
    ],
)
def test_errors_name_the_key_and_file(tmp_path, text, key):
    p = write(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert key in str(e.value) and str(p) in str(e.value)


def test_unknown_override_key_is_named(tmp_path):
    with pytest.raises(ConfigError, match="stages\\[0\\].lrr"):
        load_config(write(tmp_path, BASE), ["stages.pre.lrr=1"])


def test_init_must_name_an_earlier_stage(tmp_path):
    bad = BASE.replace("kind: sft,", "kind: sft, init: later,")
    with pytest.raises(ConfigError, match="not an earlier stage"):
        load_config(write(tmp_path, bad))


def test_eval_skip_must_name_configured_suites(tmp_path):
    ok = load_config(write(tmp_path, BASE), ["stages.pre.eval_skip=[reasoning]"])
    assert ok.stage("pre").eval_skip == ["reasoning"]
    with pytest.raises(ConfigError, match=r"stages\[0\].eval_skip.*swe"):
        load_config(write(tmp_path, BASE), ["stages.pre.eval_skip=[swe]"])


def test_copy_priming_needs_a_fresh_preset(tmp_path):
    ok = load_config(
        write(tmp_path, BASE), ["model.prime_induction=true", "stages.pre.copy_rows=0.25"]
    )
    assert ok.model.prime_induction and ok.stage("pre").copy_rows == 0.25
    with pytest.raises(ConfigError, match="model.path checkpoint is already trained"):
        load_config(write(tmp_path, BASE), ["model.prime_induction=true", "model.path=/m"])
    with pytest.raises(ConfigError, match="tie_word_embeddings"):
        load_config(
            write(tmp_path, BASE),
            ["model.prime_induction=true", "model.overrides={tie_word_embeddings: true}"],
        )
    with pytest.raises(ConfigError, match="copy_rows"):
        load_config(write(tmp_path, BASE), ["stages.pre.copy_rows=1.0"])


def test_shipped_configs_parse():
    for name in ("scratch.yaml", "smoke.yaml", "cpu-long.yaml"):
        cfg = load_config(ROOT / "configs" / name)
        kinds = [s.kind for s in cfg.stages if s.kind != "synth"]  # synthesis trains nothing
        assert kinds[:3] == ["pretrain", "midtrain", "sft"]
    demo = load_config(ROOT / "configs" / "demo.yaml")  # the default: a real checkpoint
    assert demo.model.path and demo.chat.format == "native"
    kinds = [s.kind for s in demo.stages if s.kind != "synth"]
    assert kinds == ["midtrain", "sft", "rl", "agentic_rl", "general_rl", "distill"]


@pytest.mark.slow  # one CLI process per bad input (~13 s): make test-all
def test_cli_user_error_is_one_line_exit_2(tmp_path):
    p = write(tmp_path, BASE.replace("tokens: 1000", "tokens: lots"))
    r = subprocess.run(
        [sys.executable, "-m", "arcforge.cli", "run", str(p)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "stages[0].tokens" in lines[0]
    r = subprocess.run(
        [sys.executable, "-m", "arcforge.cli", "run", str(tmp_path / "nope.yaml")],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert r.returncode == 2 and "not found" in r.stderr and "Traceback" not in r.stderr


def test_stage_kinds_are_one_union_each_with_its_runner():
    """`RunCfg.stages` is a discriminated union on `kind`: a dict validates to its kind's model
    (no registry), and every member has a runner in the pipeline."""
    from arcforge.pipeline import RUNNERS
    from arcforge.run_config import STAGE_KINDS, RunCfg
    from arcforge.stages.distill import DistillStageCfg
    from arcforge.stages.rl import RLStageCfg

    cfg = RunCfg.model_validate(
        {
            "stages": [
                {"name": "r", "kind": "rl", "sources": [{"source": "world:reasoning"}]},
                {"name": "d", "kind": "distill", "teachers": [{"checkpoint": "r", "sources": []}]},
            ]
        }
    )
    assert [type(s) for s in cfg.stages] == [RLStageCfg, DistillStageCfg]
    assert set(STAGE_KINDS.values()) == set(RUNNERS)
    assert {"pretrain", "midtrain", "sft", "synth", "rl", "agentic_rl"} <= set(STAGE_KINDS)


def test_config_module_imports_no_stage():
    """arcforge.config is below the stages: no import of arcforge.stages, run_config or
    pipeline anywhere in it (function bodies included), and importing it loads none."""
    import ast

    tree = ast.parse((ROOT / "arcforge" / "config.py").read_text())
    names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    upper = ("arcforge.stages", "arcforge.run_config", "arcforge.pipeline", "arcforge.train")
    assert not [m for m in names if m.startswith(upper)]
    code = "import sys, arcforge.config; print(sorted(m for m in sys.modules if 'stages' in m))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stderr


def test_rl_type_stages_share_one_loss_config():
    """The loss keys live in LossCfg once: the RL-type stage models inherit them and none
    declares clip bounds or loss aggregation itself."""
    from arcforge.config import LossCfg
    from arcforge.run_config import STAGE_KINDS

    rl_kinds = {"rl", "agentic_rl", "general_rl", "distill"}
    for kind, cls in STAGE_KINDS.items():
        assert issubclass(cls, LossCfg) == (kind in rl_kinds), kind
        if kind in rl_kinds:
            own = set(vars(cls).get("__annotations__", {}))
            assert not own & {"loss_agg", "clip_low", "clip_high", "kl_coef"}, kind
            assert "engine" in cls.model_fields, kind


def test_engine_and_loss_keys_are_checked_per_stage(tmp_path):
    """`engine:` and the loss keys validate like any key: a bad engine kind or a KL term on a
    trainer without a reference policy is one error naming the stage's key."""
    p = write(tmp_path, (ROOT / "configs" / "smoke.yaml").read_text())
    cfg = load_config(p, ["stages.rl.engine.kind=vllm", "stages.agentic_rl.clip_high=0.3"])
    assert cfg.stage("rl").engine.kind == "vllm" and cfg.stage("agentic_rl").clip_high == 0.3
    assert cfg.stage("distill").engine.kind == "local"
    with pytest.raises(ConfigError, match=r"stages\[3\]\.engine\.kind"):
        load_config(p, ["stages.3.engine.kind=tgi"])
    with pytest.raises(ConfigError, match=r"stages\[4\].*kl_coef.*no reference policy"):
        load_config(p, ["stages.agentic_rl.kl_coef=0.1"])
    with pytest.raises(ConfigError, match=r"stages\[4\].*needs backend local"):
        load_config(p, ["stages.agentic_rl.engine.kind=vllm", "stages.agentic_rl.backend=ray"])


def test_dumped_config_loads_back_equal(tmp_path):
    """A run's saved config.yaml (every default written out) parses to the same config."""
    from arcforge.run_config import dump_config

    cfg = load_config(ROOT / "configs" / "smoke.yaml")
    p = write(tmp_path, dump_config(cfg))
    assert load_config(p) == cfg


def test_run_seed_shifts_every_stage_seed_once():
    """`seed=1` reruns the recipe on another draw: every stage seed moves by the run seed (their
    differences kept), and the saved config reloads to the same seeds, not shifted twice."""
    import yaml

    from arcforge.run_config import dump_config, parse_config

    base = load_config(ROOT / "configs" / "demo.yaml")
    shifted = load_config(ROOT / "configs" / "demo.yaml", ["seed=1"])
    before = {s.name: s.seed for s in base.stages}
    after = {s.name: s.seed for s in shifted.stages}
    assert after == {k: v + 1 for k, v in before.items()}
    again = parse_config(yaml.safe_load(dump_config(shifted)))
    assert {s.name: s.seed for s in again.stages} == after
