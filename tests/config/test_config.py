"""Config loading: typed stages, overrides, and errors that name the key and the file."""

import subprocess
import sys
from pathlib import Path

import pytest

from arcforge.config import LMStageCfg, SFTStageCfg, load_config
from arcforge.errors import ConfigError

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
    for name in ("demo.yaml", "smoke.yaml"):
        cfg = load_config(ROOT / "configs" / name)
        kinds = [s.kind for s in cfg.stages if s.kind != "synth"]  # synthesis trains nothing
        assert kinds[:3] == ["pretrain", "midtrain", "sft"]


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
