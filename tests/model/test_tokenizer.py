"""Byte-level BPE: lossless round-trip, one id per chat special token, HF loading."""

from __future__ import annotations

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from arcforge.chat.tokens import BOS, EOS, PAD, SPECIAL_TOKENS
from arcforge.model.tokenizer import load_tokenizer, save_tokenizer, train_tokenizer

CORPUS = [
    "The river Alder flows through Brenwick. Population: 1204.",
    "def add(a, b):\n    return a + b\n",
    "Q: what is 12 + 30? Reasoning: 12 + 30 = 42. Answer: 42",
] * 40


@pytest.fixture(scope="module")
def tok() -> PreTrainedTokenizerFast:
    return train_tokenizer(CORPUS, vocab_size=400, model_max_length=256)


def test_roundtrip_arbitrary_unicode(tok):
    # Characters never seen in training (CJK, emoji, combining marks, control bytes) must still
    # round-trip: the byte-level alphabet covers every byte.
    texts = ["héllo 世界 🤖", "e\u0301\u200b\x00\x07\ttab\r\n", "  two  spaces  ", "Ωμέγα—“quoted”"]
    for s in texts:
        ids = tok.encode(s, add_special_tokens=False)
        assert tok.decode(ids) == s


def test_special_tokens_are_single_ids(tok):
    ids = [tok.encode(t, add_special_tokens=False) for t in SPECIAL_TOKENS]
    assert all(len(i) == 1 for i in ids)
    # Added first, in order: <|pad|>=0, <|bos|>=1, <|endoftext|>=2, ...
    assert [i[0] for i in ids] == list(range(len(SPECIAL_TOKENS)))
    assert (tok.pad_token, tok.bos_token, tok.eos_token) == (PAD, BOS, EOS)
    assert (tok.pad_token_id, tok.bos_token_id, tok.eos_token_id) == (0, 1, 2)
    assert tok.model_max_length == 256
    # Inside running text a special token is still one id, not split into bytes.
    ids = tok.encode("hi<|end|>\n<think>x</think>", add_special_tokens=False)
    assert tok.convert_tokens_to_ids("<|end|>") in ids
    assert tok.convert_tokens_to_ids("</think>") in ids


def test_bpe_learned_merges(tok):
    # A frequent training word must compress below its byte count.
    assert len(tok.encode(" return", add_special_tokens=False)) < len(" return")
    assert len(tok) <= 400


def test_vocab_too_small_is_an_error():
    with pytest.raises(ValueError, match="vocab_size"):
        train_tokenizer(CORPUS, vocab_size=100)


def test_save_and_autotokenizer_load(tok, tmp_path):
    save_tokenizer(tok, tmp_path)
    hf = AutoTokenizer.from_pretrained(str(tmp_path))
    s = "Answer: 42 <|end|> 世界"
    assert hf.encode(s, add_special_tokens=False) == tok.encode(s, add_special_tokens=False)
    assert set(SPECIAL_TOKENS) <= set(hf.all_special_tokens)
    assert hf.pad_token_id == 0 and hf.eos_token_id == 2
    ours, n_added = load_tokenizer(tmp_path)
    assert n_added == 0 and len(ours) == len(tok)


def test_load_foreign_tokenizer_adds_missing_chat_tokens(tmp_path):
    # A "foreign" tokenizer: BPE with its own eos and none of our chat tokens, and no pad.
    raw = Tokenizer(models.BPE())
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=["</s>", "<think>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    raw.train_from_iterator(CORPUS, trainer=trainer)
    foreign = PreTrainedTokenizerFast(tokenizer_object=raw, eos_token="</s>")
    foreign.save_pretrained(str(tmp_path))
    base_len = len(foreign)
    loaded, n_added = load_tokenizer(tmp_path)
    # 12 chat tokens, "<think>" already present -> 11 new, pad among them.
    assert n_added == 11
    assert len(loaded) == base_len + 11
    assert loaded.pad_token == PAD and loaded.eos_token == "</s>"
    for t in SPECIAL_TOKENS:
        assert len(loaded.encode(t, add_special_tokens=False)) == 1


def test_load_missing_dir(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_tokenizer(tmp_path / "nope")


NAMES = ["Vofe Vulios", "Yebraen Studios", "Loustiar Laeva"]
NAME_CORPUS = [
    f'Where was {n} born? <tool_call>{{"name": "lookup", "arguments": {{"entity": "{n}"}}}}'
    for n in NAMES
] * 30 + CORPUS


def _name_ids(tok, text: str, name: str) -> list[int]:
    """The ids that decode to `name` inside `text` (the name's own tokens, space excluded)."""
    ids = tok.encode(text, add_special_tokens=False)
    for i in range(len(ids)):
        for j in range(i + 1, len(ids) + 1):
            if tok.decode(ids[i:j]) == name:
                return ids[i:j]
    return []


@pytest.mark.parametrize("split", ["upper", "letter"])
def test_space_split_gives_a_name_the_same_ids_after_a_space_and_after_a_quote(split):
    tok = train_tokenizer(NAME_CORPUS, vocab_size=400, space_split=split)
    for n in NAMES + ["Zorvan Quell"]:  # the last never seen in training
        question = _name_ids(tok, f"Where was {n} born?", n)
        call = _name_ids(tok, f'{{"entity": "{n}"}}', n)
        assert question and question == call, (n, question, call)
    for s in ["  two  spaces  ", "def f(x):\n    return X + 1", "héllo Ωμέγα Wörld"]:
        assert tok.decode(tok.encode(s, add_special_tokens=False)) == s


def test_without_space_split_a_name_after_a_space_starts_on_another_token():
    # What space_split exists for: byte-level BPE glues the space into the name's first token,
    # so the question's " Vofe" and the call's "Vofe" share no first id.
    tok = train_tokenizer(NAME_CORPUS, vocab_size=400)
    call = _name_ids(tok, '{"entity": "Vofe Vulios"}', "Vofe Vulios")
    question = tok.encode("Where was Vofe Vulios born?", add_special_tokens=False)
    assert call and _name_ids(tok, "Where was Vofe Vulios born?", "Vofe Vulios") == []
    assert call[0] not in question


def test_unknown_space_split_is_an_error():
    with pytest.raises(ValueError, match="space_split"):
        train_tokenizer(CORPUS, vocab_size=400, space_split="words")


def test_native_checkpoint_keeps_its_template_kwargs_and_dialect(tmp_path):
    """A checkpoint saved in the native format reloads with the template kwargs and dialect it
    was trained with, so `arcforge eval`/`chat`/`serve` render what training rendered."""
    from arcforge.chat.formats import attach_format
    from arcforge.model.families import family_tokenizer
    from arcforge.types import Message

    tok = family_tokenizer("qwen3")
    attach_format(tok, "native", {"enable_thinking": False}, "hermes")
    msgs = [Message("user", "hi")]
    want = tok.arcforge_chat_format.render_text(msgs, None, True)
    assert "<think>\n\n</think>" in want  # Qwen3's template closes an empty think block
    save_tokenizer(tok, tmp_path)
    back, added = load_tokenizer(tmp_path)
    assert added == 0 and back.arcforge_chat_format.template_kwargs == {"enable_thinking": False}
    assert back.arcforge_chat_format.render_text(msgs, None, True) == want
    # a kwarg given at load time wins over the saved one
    on, _ = load_tokenizer(tmp_path, "native", {"enable_thinking": True})
    assert "<think>\n\n</think>" not in on.arcforge_chat_format.render_text(msgs, None, True)
    (tmp_path / "arcforge_chat.json").write_text("{not json")
    with pytest.raises(ValueError, match="arcforge_chat.json"):
        load_tokenizer(tmp_path)
