"""The outcome reward model: Bradley-Terry training on world preference pairs lifts held-out
pair accuracy well above chance in seconds; the saved directory loads back to the same scores."""

import math

import pytest
import torch

from arcforge.errors import UserError
from arcforge.model.checkpoint import init_model
from arcforge.model.presets import build_config
from arcforge.model.tokenizer import train_tokenizer
from arcforge.rewards.orm import RewardModel
from arcforge.train.reward_model import Pair, RewardModelCfg, pair_accuracy, train_reward_model
from arcforge.world import WorldConfig, build_world
from arcforge.world.text.preferences import preference_pairs

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def setup():
    world = build_world(WorldConfig(seed=11, scale=0.2))
    tok = train_tokenizer([d.text for d in world.corpus()[:600]], vocab_size=1024)

    def pairs(split):
        ps = preference_pairs(world.tasks("chat", split), world.config.seed, per_task=3)
        return [Pair(p.prompt, p.chosen, p.rejected) for p in ps]

    return tok, pairs("train"), pairs("test")


def fresh_rm(tok) -> RewardModel:
    conf = build_config(
        "nano", vocab_size=len(tok), max_position_embeddings=512, pad_token_id=tok.pad_token_id
    )
    torch.manual_seed(0)
    return RewardModel(init_model(conf, seed=0), tok, max_len=256)


@pytest.mark.slow  # over 10 s: `make test-all` runs it (make test stays under 10 minutes)
def test_orm_learns_preferences_and_round_trips(setup, tmp_path):
    tok, train, test = setup
    assert len(test) >= 40 and not {p.prompt for p in train} & {p.prompt for p in test}
    rm = fresh_rm(tok)
    cfg = RewardModelCfg(
        steps=60, batch_size=8, optim={"lr": 1e-3, "warmup_steps": 5, "weight_decay": 0.0}
    )
    s = train_reward_model(rm, train, cfg, tmp_path / "log", test)
    assert math.isfinite(s["loss_last"]) and s["loss_last"] < s["loss_first"]
    # chance is 0.5; 0.75 on >= 40 unseen prompts is far outside a coin's 95% range (~0.35-0.65)
    assert s["heldout_accuracy"] >= 0.75, s
    assert (tmp_path / "log" / "metrics.jsonl").read_text().count("\n") == 60
    rm.save(tmp_path / "orm")
    back = RewardModel.load(tmp_path / "orm")
    prompts, replies = [p.prompt for p in test[:6]], [p.rejected for p in test[:6]]
    torch.testing.assert_close(
        torch.tensor(back.score(prompts, replies)),
        torch.tensor(rm.score(prompts, replies)),
        atol=1e-5,
        rtol=0,
    )
    assert (back.center, back.scale) == (rm.center, rm.scale)
    assert back.meta["training"]["heldout_accuracy"] == s["heldout_accuracy"]
    assert pair_accuracy(back, test) == s["heldout_accuracy"]
    # normalization maps the centre to 0.5 and keeps the order
    assert back.normalize(back.center) == pytest.approx(0.5)
    assert back.normalize(back.center + 1) > 0.5 > back.normalize(back.center - 1)


def test_loading_a_non_reward_model_dir_is_a_clear_error(tmp_path):
    with pytest.raises(UserError, match="not a reward model directory"):
        RewardModel.load(tmp_path)


@pytest.mark.slow  # over 5 s: `make test-all` runs it (make test stays under 10 minutes)
def test_train_rm_cli_bad_input_is_one_line(tmp_path):
    import subprocess
    import sys

    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "arcforge.cli",
            "train-rm",
            str(tmp_path),
            "--out",
            str(tmp_path / "rm"),
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2
    assert r.stderr.strip() == f"error: {tmp_path} is not a checkpoint directory (no config.json)"
