"""A tiny byte-level BPE tokenizer with the chat special tokens, built in-process (no hub)."""

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from arcforge.chat.tokens import BOS, EOS, PAD, SPECIAL_TOKENS

_CORPUS = [
    "What is 2+3? Let me add the numbers. The answer is 5.",
    "Hello world, the weather today is sunny and the temperature is 21 degrees.",
    '{"name": "add", "arguments": {"a": 2, "b": 3}} {"type": "function"}',
    "I need to call the tool first. Then I will reply with the result.",
]


@pytest.fixture(scope="session")
def tokenizer() -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=420,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_CORPUS * 4, trainer=trainer)
    extra = [t for t in SPECIAL_TOKENS if t not in (PAD, BOS, EOS)]
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        extra_special_tokens=extra,
        clean_up_tokenization_spaces=False,
    )
