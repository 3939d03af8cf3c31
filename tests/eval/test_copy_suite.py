"""The `copy` suite scores a model's teacher-forced copy of a name's second mention: an
induction oracle (predicts whatever followed the earlier position whose context matches the
current one longest) copies every name, a model that never looks back copies none, and the suite runs in the
harness on a real checkpoint."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from arcforge.config import EvalCfg
from arcforge.eval.copying import TEMPLATES, CopyItem, probe_names, score_copy, summary
from arcforge.eval.evaluator import Evaluator
from arcforge.eval.suites import SUITES
from arcforge.model.checkpoint import init_model
from arcforge.model.presets import build_config


class InductionOracle(torch.nn.Module):
    """Not a model we own: a stand-in that copies perfectly, to check the scoring."""

    def __init__(self, vocab: int, look_back: bool = True):
        super().__init__()
        self.vocab, self.look_back = vocab, look_back

    def forward(self, input_ids: torch.Tensor):
        ids = input_ids[0].tolist()
        logits = torch.zeros(1, len(ids), self.vocab)
        for t in range(len(ids)):
            nxt, best = 0, 0
            for s in range(t - 1, -1, -1) if self.look_back else ():
                k = 0
                while k <= s and ids[s - k] == ids[t - k]:
                    k += 1
                if k > best:
                    nxt, best = ids[s + 1], k
            logits[0, t, nxt] = 1.0
        return SimpleNamespace(logits=logits)


def test_oracle_copies_every_name_and_a_blind_model_none(world, tok):
    kb, fresh = probe_names(world)
    items = [CopyItem(n, TEMPLATES[0], True) for n in fresh[:10]] + [
        CopyItem(n, t, False) for n in kb[:5] for t in TEMPLATES
    ]
    good = score_copy(InductionOracle(len(tok)), tok, items)
    assert all(len(r.correct) >= 2 for r in good)  # two-word names are several tokens
    # "the word '" repeats the context of the first mention, so the oracle starts the name...
    assert summary(good[:10]) == {"first": 1.0, "whole": 1.0}
    # ...elsewhere matching alone misses the first token and a few repeated pieces
    mean = sum(r.score for r in good) / len(good)
    blind = score_copy(InductionOracle(len(tok), look_back=False), tok, items)
    assert summary(blind)["whole"] == 0.0
    assert mean > 0.7 and mean > 0.5 + sum(r.score for r in blind) / len(blind)


def test_copy_suite_in_the_harness(world, tok):
    model = init_model(build_config("nano", vocab_size=len(tok), max_position_embeddings=256), 0)
    out = SUITES["copy"](Evaluator(model, tok, None, world), EvalCfg(suites=["copy"], n=8))
    assert len(out.scores) == 8 and all(0.0 <= s <= 1.0 for s in out.scores)
    assert [e["names"] for e in out.examples] == ["kb", "fresh"]
    assert max(out.scores) < 0.5  # an untrained model does not copy
