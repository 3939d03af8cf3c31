"""The engine protocol and its types: token ids in, sampled token ids and their logprobs out.

`Engine` is the protocol the agent loop and the RL loops speak; `SamplingParams` says how to
sample and `Completion` is one sampled continuation. The implementations live beside this
module: `LocalEngine` (local.py, in-process PyTorch), `ServerEngine` (http.py, any
OpenAI-compatible server), `VLLMEngine` (vllm.py) and `SGLangEngine` (sglang.py); `make_engine`
(factory.py) builds the one a config names.

Logprob convention (every engine): the logprob of each sampled token is log_softmax of the raw
model logits at temperature 1, before temperature / top-k / top-p. That is the policy logprob
the trainer recomputes, and it is what vLLM returns by default (raw logprobs). At T=1 without
top-k/top-p it is also the sampling distribution's logprob. With
`SamplingParams.tempered_logprobs` (LocalEngine only) it is log_softmax(logits / T), the
logprob of the tempered policy that sampled the token (before top-k/top-p); a trainer that
divides its logits by the same T then takes the policy gradient of the distribution it sampled
from (verl and slime divide by the rollout temperature), where raw logprobs give the gradient
of the T=1 policy on samples of another.

Generation stops only at `stop_token_ids` (pass the EOS id there; vLLM also stops at EOS).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

import torch

FinishReason = Literal["stop", "length"]


@dataclass(frozen=True)
class SamplingParams:
    """How to sample. temperature 0 is greedy; top_k 0 and top_p 1 are off.

    With a `seed`, row r of a call (r = prompt_index * n + sample_index) samples from its own
    generator seeded `seed + r`, so its tokens do not depend on the rest of the batch.
    """

    max_new_tokens: int = 64
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    stop_token_ids: tuple[int, ...] = ()
    seed: int | None = None
    n: int = 1
    tempered_logprobs: bool = False  # logprobs under logits / temperature (see the header)

    def __post_init__(self) -> None:
        object.__setattr__(self, "stop_token_ids", tuple(int(t) for t in self.stop_token_ids))
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0 or self.n < 1:
            raise ValueError(f"top_k must be >= 0 and n >= 1, got {self.top_k}, {self.n}")


@dataclass
class Completion:
    """One sampled continuation. A stop token, when hit, is the last entry of token_ids."""

    token_ids: list[int]
    logprobs: list[float]  # raw-logit logprob of each token in token_ids (see module docstring)
    finish_reason: FinishReason
    version: int | None = None  # the weight version that sampled it, when the engine knows
    # with a LocalEngine that records routing: per MoE router (layer order), the (L - 1, k)
    # experts it picked for the prompt and every sampled token but the last (the L - 1 inputs
    # of the trainer's teacher-forced forward over prompt + completion); None otherwise
    routing: list[torch.Tensor] | None = None


@runtime_checkable
class Engine(Protocol):
    """Returns completions ordered prompt by prompt, the n samples of a prompt adjacent."""

    @property
    def version(self) -> int: ...

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]: ...

    def load_weights(self, state_dict: dict[str, torch.Tensor], version: int) -> None: ...
