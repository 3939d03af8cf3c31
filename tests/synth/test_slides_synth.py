"""Dynamic sampling, best-of-N and masked correction for slide decks."""

from __future__ import annotations

import random

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from arcforge.browser import browser_missing
from arcforge.synth.slides import (
    best_of_n,
    curate_decks,
    masked_correction,
    skip_simple,
    slide_spans,
    token_loss_mask,
)
from arcforge.types import Reward
from arcforge.world.knowledge.kb import build_kb
from arcforge.world.knowledge.names import NameBank
from arcforge.world.tasks.slide_decks import reference_deck, slides_tasks

DECK = (
    '<p>intro</p><section class="slide"><h2>A</h2></section>\n'
    '<section class="slide"><section>inner</section><p>B</p></section>'
    '<section class="slide"><p>C</p></section>'
)


def _tasks(n: int):
    rng = random.Random(3)
    return slides_tasks(build_kb(rng, NameBank(rng), 60, 12, 12, 30, 0.0), n, 0, seed=5)[0]


def test_skip_simple_drops_flat_and_easy_groups():
    groups = [[0.2, 0.9, 0.5], [0.4, 0.4, 0.4], [0.96, 0.99, 1.0], [0.5, 1.0, 1.0], [0.0, 0.0, 0.0]]
    # varied+hard, all equal, all >= .95 (too simple), varied, all equal (no signal)
    assert skip_simple(groups) == [True, False, False, True, False]
    with pytest.raises(ValueError, match="equal size"):
        skip_simple([[1.0], [1.0, 0.0]])


def test_best_of_n_keeps_the_best_above_the_bar():
    rs = [Reward(0.5), Reward(0.91), Reward(0.91), Reward(0.3)]
    pick = best_of_n(rs, min_score=0.8)
    assert pick.index == 1 and pick.scores == [0.5, 0.91, 0.91, 0.3]  # ties: the first
    assert best_of_n(rs, min_score=0.95).index is None
    assert best_of_n([]).index is None


def test_slide_spans_find_top_level_sections():
    spans = slide_spans(DECK)
    assert [DECK[a:b] for a, b in spans] == [
        '<section class="slide"><h2>A</h2></section>',
        '<section class="slide"><section>inner</section><p>B</p></section>',
        '<section class="slide"><p>C</p></section>',
    ]
    assert slide_spans('<section class="slide">open') == [(0, 27)]


def test_masked_correction_masks_bad_slides_only():
    reward = Reward(0.6, {"per_slide": [{"score": 0.9}, {"score": 0.2}, {"score": 0.8}]})
    m = masked_correction(DECK, reward, threshold=0.7)
    assert m.use and m.keep_slides == [True, False, True]
    assert [DECK[a:b] for a, b in m.masked_spans] == [
        DECK[slide_spans(DECK)[1][0] : slide_spans(DECK)[1][1]]
    ]
    all_bad = Reward(0.1, {"per_slide": [{"score": 0.1}] * 3})
    assert not masked_correction(DECK, all_bad).use
    wrong_count = Reward(0.9, {"per_slide": [{"score": 0.9}] * 2})
    assert not masked_correction(DECK, wrong_count).use  # slides could not be matched


def _tokenizer() -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300, show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator([DECK] * 4, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok)


def test_token_loss_mask_zeroes_exactly_the_masked_span():
    tok = _tokenizer()
    span = slide_spans(DECK)[1]
    ids, mask = token_loss_mask(tok, DECK, [span])
    assert len(ids) == len(mask) and 0 in mask and mask[0] == 1 and mask[-1] == 1
    masked_text = tok.decode([i for i, m in zip(ids, mask) if m == 0])
    kept_text = tok.decode([i for i, m in zip(ids, mask) if m == 1])
    assert "inner" in masked_text and "B" in masked_text and "C" in kept_text
    assert DECK[span[0] : span[1]] in masked_text  # every character of the slide is masked


@pytest.mark.skipif(browser_missing() is not None, reason=f"needs a browser: {browser_missing()}")
def test_curate_decks_skips_simple_and_keeps_best_with_mask():
    easy, hard = _tasks(2)
    clean = reference_deck(hard)
    # break slide 2: ten extra bullets hidden by overflow: hidden on that slide only
    spans = slide_spans(clean)
    a, b = spans[1]
    bad = clean[a:b].replace(
        '<section class="slide">', '<section class="slide" style="overflow: hidden">'
    )
    bad = bad.replace("</ul>", "<li>more</li>" * 14 + "</ul>")
    broken = clean[:a] + bad + clean[b:]
    samples = {easy.id: [reference_deck(easy)] * 2, hard.id: [broken, "no deck, sorry"]}
    records, counts = curate_decks(
        [easy, hard], lambda t, n: samples[t.id][:n], n=2, min_score=0.5, threshold=0.7
    )
    assert counts == {"tasks": 2, "samples": 4, "skipped_simple": 1, "rejected": 0, "kept": 1}
    (rec,) = records
    assert rec["task_id"] == hard.id and rec["messages"][1]["content"] == broken
    assert rec["keep_slides"] == [True, False] + [True] * (len(spans) - 2)
    ((ma, mb),) = rec["masked_spans"]
    assert broken[ma:mb].startswith('<section class="slide" style="overflow: hidden">')
