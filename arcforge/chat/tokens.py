"""The chat template's special tokens, shared by the tokenizer trainer and the template.

Each is a single token in every tokenizer arcforge trains. For a foreign checkpoint's tokenizer
they are added as special tokens when missing (see arcforge.model.tokenizer).

Rendered shape (one message):
    <|system|>\n{content}<|end|>\n
    <|user|>\n{content}<|end|>\n
    <|assistant|>\n<think>\n{reasoning}\n</think>\n{content}<tool_call>{json}</tool_call><|end|>\n
    <|tool|>\n{content}<|end|>\n
Generation stops at <|end|>. <|endoftext|> separates documents in pretraining streams.
"""

BOS = "<|bos|>"
EOS = "<|endoftext|>"
PAD = "<|pad|>"
SYSTEM = "<|system|>"
USER = "<|user|>"
ASSISTANT = "<|assistant|>"
TOOL = "<|tool|>"
END = "<|end|>"
THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
CALL_OPEN = "<tool_call>"
CALL_CLOSE = "</tool_call>"

SPECIAL_TOKENS: list[str] = [
    PAD,
    BOS,
    EOS,
    SYSTEM,
    USER,
    ASSISTANT,
    TOOL,
    END,
    THINK_OPEN,
    THINK_CLOSE,
    CALL_OPEN,
    CALL_CLOSE,
]
ROLE_TOKENS = {"system": SYSTEM, "user": USER, "assistant": ASSISTANT, "tool": TOOL}
