"""long_context_nll: teacher-forced loss of the right answer after the whole long document,
checked against transformers' own masked-label loss; documents longer than the model's
context keep their last tokens."""

from __future__ import annotations

import math

import pytest
import torch

from arcforge.config import EvalCfg
from arcforge.eval.evaluator import Evaluator
from arcforge.eval.suites import SUITES
from arcforge.model.checkpoint import init_model
from arcforge.model.presets import build_config
from arcforge.stats import LOWER_IS_BETTER


@pytest.mark.parametrize("max_pos", [2048, 96])
def test_answer_loss_matches_transformers_labels(world, tok, max_pos):
    model = init_model(
        build_config("nano", vocab_size=len(tok), max_position_embeddings=max_pos), 0
    )
    cfg = EvalCfg(suites=["long_context_nll"], n=3)
    out = SUITES["long_context_nll"](Evaluator(model, tok, None, world), cfg)
    assert len(out.scores) == 3 and "long_context_nll" in LOWER_IS_BETTER
    for t, score in zip(world.tasks("long_context", "test")[:3], out.scores):
        ctx = tok(t.instruction + "\nAnswer:", add_special_tokens=False)["input_ids"]
        ans = tok(" " + t.validation.answer, add_special_tokens=False)["input_ids"]
        ids = (ctx + ans)[-max_pos:]
        assert len(ctx) + len(ans) > 96  # the short model really has to cut the document
        labels = [-100] * (len(ids) - len(ans)) + ans
        with torch.inference_mode():
            ref = model(input_ids=torch.tensor([ids]), labels=torch.tensor([labels])).loss.item()
        assert math.isfinite(score) and score == pytest.approx(ref, abs=1e-4)
