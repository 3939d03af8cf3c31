"""The hybrid reward: pure combinators by hand, gates that zero the reward without asking the
judges, per-task routing, and the ORM/GRM disagreement flag (real ORM, real HTTP judge)."""

import math

import pytest
import torch

from arcforge.llm import LLMClient
from arcforge.model.checkpoint import init_model
from arcforge.model.presets import build_config
from arcforge.replay import ReplayServer
from arcforge.rewards.grm import GenerativeRM
from arcforge.rewards.hybrid import (
    HybridCfg,
    HybridReward,
    combine,
    disagreement,
    length_factor,
    reference_words,
)
from arcforge.rewards.orm import RewardModel
from arcforge.types import Task, Validation


def chat(cons, **meta) -> Task:
    return Task(
        "t", "chat", "Write about Ann.", validation=Validation(constraints=cons), metadata=meta
    )


ANN = [{"type": "include", "word": "Ann"}, {"type": "max_words", "n": 8}]


def test_length_factor_by_hand():
    # ref 10, tol 0.5 -> free up to 15 words; 30 words: (15 / 30)^1 = 0.5; alpha 2: 0.25
    assert length_factor(15, 10, 0.5, 1.0) == 1.0
    assert length_factor(30, 10, 0.5, 1.0) == pytest.approx(0.5)
    assert length_factor(30, 10, 0.5, 2.0) == pytest.approx(0.25)
    assert length_factor(30, None, 0.5, 1.0) == 1.0 and length_factor(0, 10, 0.5, 1.0) == 1.0


def test_combine_by_hand():
    # w = (1, 0.5, 0.5): (1*1 + 0.5*0.8*0.5 + 0.5*0.4*0.5) / 2 = (1 + 0.2 + 0.1) / 2 = 0.65
    assert combine(1.0, 0.8, 0.4, (1.0, 0.5, 0.5), length=0.5) == pytest.approx(0.65)
    # no GRM (None or NaN): (1*0.5 + 0.5*0.8) / 1.5 = 0.6
    assert combine(0.5, 0.8, None, (1.0, 0.5, 0.5)) == pytest.approx(0.6)
    assert combine(0.5, 0.8, math.nan, (1.0, 0.5, 0.5)) == pytest.approx(0.6)
    assert disagreement(0.9, 0.2, 0.5) and not disagreement(0.9, 0.5, 0.5)
    assert not disagreement(0.9, None, 0.5) and not disagreement(0.9, math.nan, 0.5)


def test_reference_length():
    assert reference_words(chat([], ref_words=7)) == 7
    assert reference_words(chat([], solution="Ann lives in Krou.")) == 4
    assert reference_words(chat([])) is None


def client(srv) -> LLMClient:
    return LLMClient(srv.base_url, "judge", api_key_env=None)


def test_gates_zero_the_reward_and_skip_the_judge():
    with ReplayServer(lambda m: "Score: 10") as srv:
        h = HybridReward(HybridCfg(), grm=GenerativeRM(client(srv), k=1, workers=1))
        rs = h.score_batch(
            [chat(ANN)] * 3,
            ["Bob is here.", "", "Ann is here."],
            parse_errors=[(), (), ()],
            n_tool_calls=[0, 0, 0],
        )
        asked = len(srv.requests)
    assert [r.score for r in rs[:2]] == [0.0, 0.0]
    assert rs[0].details["gated"] == ["required"] and "format" in rs[1].details["gated"]
    # the passing reply: rule 1.0, GRM 1.0 -> (1 + 0.5) / 1.5 = 1.0
    assert rs[2].score == pytest.approx(1.0) and rs[2].details["grm"] == 1.0
    assert asked == 1  # only the reply that passed the gates went to the judge
    assert h.counts["gated"] == 2 and h.counts["scored"] == 3


def test_routing_by_category_overrides_weights():
    cfg = HybridCfg(routes={"text_processing": {"w_grm": 0.0, "gates": ["format"]}})
    json_task = chat([{"type": "json_keys", "keys": ["a"]}])
    with ReplayServer(lambda m: "Score: 1") as srv:
        h = HybridReward(cfg, grm=GenerativeRM(client(srv), k=1, workers=1))
        rs = h.score_batch([json_task, chat(ANN)], ["not json", "Ann is here."])
        asked = len(srv.requests)
    # text_processing: json gate off by route -> rule 0 (wrong keys), no judge -> 0.0
    assert rs[0].details["route"] == "text_processing" and rs[0].score == 0.0
    assert "grm" in rs[0].details and rs[0].details["grm"] is None
    # writing: rule 1, judge 1/10 -> 0 -> (1*1 + 0.5*0) / 1.5 = 0.666667
    assert rs[1].details["route"] == "writing" and rs[1].score == pytest.approx(2 / 3)
    assert asked == 1


def tiny_orm(center: float) -> RewardModel:
    from arcforge.model.tokenizer import train_tokenizer

    tok = train_tokenizer(["Ann is here. Write about Ann and Bob."] * 20, vocab_size=300)
    conf = build_config(
        "nano", vocab_size=len(tok), max_position_embeddings=128, pad_token_id=tok.pad_token_id
    )
    torch.manual_seed(0)
    rm = RewardModel(init_model(conf, seed=0), tok, max_len=64)
    rm.center, rm.scale = center, 1e-3  # any raw score is far above centre -> normalized ~1
    return rm


def test_orm_grm_disagreement_is_flagged_counted_and_can_take_the_minimum():
    orm = tiny_orm(center=-1e3)
    with ReplayServer(lambda m: "Off topic and wrong.\nScore: 1") as srv:
        flag = HybridReward(HybridCfg(), orm, GenerativeRM(client(srv), k=1, workers=1))
        r = flag.score_batch([chat(ANN)], ["Ann is here."])[0]
        low = HybridReward(
            HybridCfg(on_disagree="min"), orm, GenerativeRM(client(srv), k=1, workers=1)
        )
        r_min = low.score_batch([chat(ANN)], ["Ann is here."])[0]
    assert r.details["orm"] == pytest.approx(1.0) and r.details["grm"] == 0.0
    assert r.details["disagree"] and flag.counts["disagree"] == 1
    # flag only: (1 + 0.5*1 + 0.5*0) / 2 = 0.75; min: both model terms 0 -> 1 / 2 = 0.5
    assert r.score == pytest.approx(0.75) and r_min.score == pytest.approx(0.5)


def test_length_guard_scales_model_terms_only():
    orm = tiny_orm(center=-1e3)  # ORM says ~1.0 for anything
    t = chat([{"type": "include", "word": "Ann"}], ref_words=2)
    h = HybridReward(HybridCfg(w_grm=0.0), orm)
    short, long = h.score_batch([t, t], ["Ann here.", " ".join(["Ann"] * 12)])
    # short: (1 + 0.5*1) / 1.5 = 1; long: 12 words vs 3 allowed -> factor 0.25
    # -> (1 + 0.5*0.25) / 1.5 = 0.75
    assert short.score == pytest.approx(1.0)
    assert long.details["length_factor"] == pytest.approx(0.25)
    assert long.score == pytest.approx(0.75, abs=1e-4)
