"""A tiny byte-level BPE tokenizer with the chat special tokens, trained in-process by the
project's own `train_tokenizer` (no hub)."""

import pytest
from transformers import PreTrainedTokenizerFast

from arcforge.model.tokenizer import train_tokenizer

_CORPUS = [
    "What is 2+3? Let me add the numbers. The answer is 5.",
    "Hello world, the weather today is sunny and the temperature is 21 degrees.",
    '{"name": "add", "arguments": {"a": 2, "b": 3}} {"type": "function"}',
    "I need to call the tool first. Then I will reply with the result.",
]


@pytest.fixture(scope="session")
def tokenizer() -> PreTrainedTokenizerFast:
    return train_tokenizer(_CORPUS * 4, vocab_size=420)
