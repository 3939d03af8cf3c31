"""RL fixtures the RL test modules share (tests/train/test_rl.py, tests/train/test_async_rl.py,
tests/rollout/test_vllm_engine.py).

Toy digit task: prompt [BOS, digit a, SEP]; the correct reply is [digit (3a + 1) mod 10, END].
Parity environment: tool-less, two replies per episode; reward 1 when the last reply has an even
number of characters, so groups have varied rewards and a policy-gradient loss has a signal.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from arcforge.envs.base import StepResult
from arcforge.rollout.engines.base import SamplingParams
from arcforge.rollout.envservice import local_service
from arcforge.rollout.orchestrator import Mixture, Orchestrator, OrchestratorSettings
from arcforge.rollout.prompts import RLPrompt
from arcforge.rollout.workers import LocalWorkers
from arcforge.stages.agentic_rl import AgenticRLStageCfg
from arcforge.stages.rl import RLStageCfg
from arcforge.types import Message, Reward, Task, Validation


@dataclass(frozen=True)
class DigitTask:
    """The toy digit task over these token ids; digit k is token `digit0 + k`."""

    bos: int
    sep: int
    end: int
    digit0: int

    def answer(self, a: int) -> int:
        """The token of the correct digit for prompt digit `a`."""
        return self.digit0 + (3 * a + 1) % 10

    def prompts(self) -> list[RLPrompt]:
        """One prompt per digit 0..9, task ids t0..t9, the answer token in its validation."""
        return [
            RLPrompt(
                [self.bos, self.digit0 + a, self.sep],
                Task(f"t{a}", "math", str(a), validation=Validation(answer=str(self.answer(a)))),
            )
            for a in range(10)
        ]

    def score(self, prompts: list[RLPrompt], comps) -> list[Reward]:
        """Reward 1 for a completion that is exactly [answer, END], 0 otherwise."""
        return [
            Reward(float(c.token_ids == [int(p.task.validation.answer), self.end]))
            for p, c in zip(prompts, comps)
        ]

    def sft_batch(
        self, p_correct: float, generator: torch.Generator | None = None, rows: int = 64
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """`rows` SFT examples (inputs, next-token targets), each (rows, 4): [BOS, a, SEP, d] and
        [-100, -100, d, END], with d the correct digit with probability `p_correct` and a random
        one otherwise; drawn from `generator` (the global RNG when None)."""
        a = torch.randint(10, (rows,), generator=generator)
        d = torch.randint(10, (rows,), generator=generator)
        d = torch.where(torch.rand(rows, generator=generator) < p_correct, (3 * a + 1) % 10, d)
        bos, sep, end = (torch.full_like(a, t) for t in (self.bos, self.sep, self.end))
        inputs = torch.stack([bos, self.digit0 + a, sep, self.digit0 + d], 1)
        targets = torch.stack([torch.full_like(a, -100)] * 2 + [self.digit0 + d, end], 1)
        return inputs, targets

    def pass_rate(self, engine, samples: int = 16) -> float:
        """Share of correct replies over `samples` samples of each prompt at T 1 (seed 999)."""
        ps = self.prompts()
        params = SamplingParams(
            max_new_tokens=3, temperature=1.0, stop_token_ids=(self.end,), seed=999, n=samples
        )
        outs = engine.generate([p.ids for p in ps], params)
        rewards = self.score([p for p in ps for _ in range(samples)], outs)
        return sum(r.score for r in rewards) / len(outs)


def flat_optim(lr: float) -> dict[str, float]:
    """A constant learning rate `lr`: no warmup, no decay, no weight decay."""
    return {"lr": lr, "warmup_steps": 0, "min_lr_ratio": 1.0, "weight_decay": 0.0}


def digit_rl_cfg(**fields) -> RLStageCfg:
    """RL on the digit task: 12 steps of 8 prompts x 8 samples at T 1 with 3 new tokens,
    micro-batches of 32, constant lr 1e-3; `fields` replace any of these."""
    stage = dict(name="rl", kind="rl", sources=[{"source": "world:reasoning"}], steps=12)
    batch = dict(prompts_per_step=8, group_size=8, micro_batch=32, optim=flat_optim(1e-3))
    sampling = dict(temperature=1.0, max_new_tokens=3)
    return RLStageCfg.model_validate({**stage, **batch, **sampling, **fields})


def parity_rl_cfg(**fields) -> AgenticRLStageCfg:
    """Agentic RL in the parity environment: 4 steps of 2 groups of 4 episodes (up to 4 turns of
    12 new tokens in 256 tokens of context), tau 2, a weight push every step, 3 workers, weight
    syncs within 30 s and batches within 60 s, micro-batches of 16, constant lr 3e-3;
    `fields` replace any of these."""
    stage = dict(name="arl", kind="agentic_rl", sources=[{"source": "world:search"}], steps=4)
    batch = dict(groups_per_step=2, group_size=4, micro_batch=16, optim=flat_optim(3e-3))
    asynchrony = dict(tau=2, sync_every=1, workers=3, weight_sync_timeout=30, batch_timeout=60)
    episodes = dict(max_turns=4, max_new_tokens=12, context_budget=256, checkpoint_every=100)
    return AgenticRLStageCfg.model_validate({**stage, **batch, **asynchrony, **episodes, **fields})


class ParityEnv:
    """The parity environment; each step takes `delay` seconds."""

    tools: list = []

    def __init__(self, delay: float = 0.0) -> None:
        self.delay, self.steps, self.last = delay, 0, ""

    def reset(self, task: Task) -> list[Message]:
        return [Message("user", task.instruction)]

    def step(self, message: Message) -> StepResult:
        if self.delay:
            time.sleep(self.delay)
        self.steps, self.last = self.steps + 1, message.content
        return StepResult([Message("user", "Again.")], done=self.steps >= 2)

    def verify(self) -> Reward:
        return Reward(float(len(self.last) % 2 == 0))

    def close(self) -> None:
        pass


def say_something_tasks(count: int = 12, prefix: str = "p") -> list[Task]:
    """`count` "search" tasks asking for any reply (ids prefix0, prefix1, ...)."""
    return [Task(f"{prefix}{i}", "search", f"Say something, number {i}.") for i in range(count)]


def parity_workers(tok, engine, c: AgenticRLStageCfg, env=ParityEnv):
    """(orchestrator, workers): one "search" pool of `say_something_tasks()` batched as `c` says
    (refill tries included), its environments made by `env()` in a local service, and
    `c.workers` local workers sampling from `engine`."""
    orch = Orchestrator(
        {"search": say_something_tasks()},
        OrchestratorSettings(
            Mixture({"search": 1}),
            c.groups_per_step,
            c.group_size,
            c.tau,
            c.sync_every,
            max_refill_tries=c.max_refill_tries,
        ),
    )
    orch.register(local_service("parity", ["search"], lambda t: env(), 16))
    return orch, LocalWorkers(orch, engine, tok, c.agent(), c.workers)
