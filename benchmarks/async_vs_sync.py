"""Asynchronous vs synchronous agentic RL: trajectories per second and trainer idle time.

Both modes run the same code (arcforge.train.async_rl with LocalWorkers), the same nano model,
the same tasks, workers and batch shape, and train on the same number of trajectories:
    sync   tau = 0, sync_every = 1: one batch of jobs per weight version (generate, train, push)
    async  tau = 2, sync_every = 1: workers keep generating while the trainer trains
Environments (mixed 1:1 per batch by the orchestrator):
    terminal  world terminal tasks in real bwrap sandboxes (open, init script, verify script);
              each episode needs a long-tailed number of rounds (lognormal per task, median 2,
              up to 12) and every round is a real sandbox exec lasting `--step-s` (a `sleep`
              standing in for a test run or build that does not compete for this machine's
              two cores)
    math      the world's arithmetic problems in MathEnv, in process: one reply, instant
Prints each mode's wall time, trajectories/s and trainer-idle fraction (time the trainer waits
for a batch / wall time), then `result: ratio=<async traj/s / sync traj/s>`. torch runs one
intra-op thread in both modes: the trainer's and the engine's ops would otherwise each spread over
all cores at once (async trainer steps measured ~3x slower that way on a loaded 2-core box).

Usage: python benchmarks/async_vs_sync.py [--quick] [--steps N] [--workers W]
"""

from __future__ import annotations

import argparse
import math
import os
import random
import resource
import statistics
import tempfile
import time
from pathlib import Path

import torch
from torch import nn

from arcforge.chat.tokens import END
from arcforge.envs.base import StepResult
from arcforge.envs.registry import env_factory
from arcforge.envs.terminal_env import TerminalEnv, format_exec
from arcforge.model.checkpoint import init_model
from arcforge.model.presets import build_config
from arcforge.model.tokenizer import train_tokenizer
from arcforge.rollout.engines.local import LocalEngine
from arcforge.rollout.envservice import local_service
from arcforge.rollout.orchestrator import Mixture, Orchestrator, OrchestratorSettings
from arcforge.rollout.workers import LocalWorkers
from arcforge.stages.agentic_rl import AgenticRLStageCfg
from arcforge.train.async_rl import train_async_rl
from arcforge.types import Message, Reward, Task
from arcforge.world import WorldConfig, build_world


def rounds_for(task_id: str, max_rounds: int = 12) -> int:
    """The task's episode length: lognormal (median 2, sigma 0.9), seeded by the task id."""
    r = random.Random(task_id).lognormvariate(math.log(2.0), 0.9)
    return max(1, min(max_rounds, round(r)))


class LongTailTerminal:
    """A world terminal task in a real sandbox whose episode lasts `rounds_for(task)` replies;
    each reply runs one sandbox exec of `step_s` seconds; graded by the task's verify script."""

    tools: list = []

    def __init__(self, step_s: float) -> None:
        self.inner, self.step_s, self.left = TerminalEnv(), step_s, 0

    def reset(self, task: Task) -> list[Message]:
        self.inner.reset(task)
        self.left = rounds_for(task.id)
        return [Message("user", task.instruction)]

    def step(self, message: Message) -> StepResult:
        res = self.inner.run_script(f"sleep {self.step_s}; ls -1 | head -3")
        self.left -= 1
        return StepResult([Message("user", format_exec(res)[:200])], done=self.left <= 0)

    def verify(self) -> Reward:
        return self.inner.verify()

    def close(self) -> None:
        self.inner.close()


def build(seed: int = 0):
    world = build_world(WorldConfig(seed=seed, scale=0.15))
    tok = train_tokenizer([d.text for d in world.corpus()[:300]], vocab_size=1024)
    model = init_model(build_config("nano", len(tok), 4096, tie_word_embeddings=False), seed=0)
    head = nn.Linear(64, len(tok), bias=True)  # bias <|end|>: replies of a few tokens
    with torch.no_grad():
        head.weight.copy_(model.lm_head.weight)
        head.bias.zero_()
        head.bias[tok.convert_tokens_to_ids(END)] = 7.0
    model.lm_head = head
    return world, tok, model


def run_mode(name: str, tau: int, world, tok, base_model, args) -> dict:
    model = _clone(base_model)
    cfg = AgenticRLStageCfg.model_validate(
        dict(
            name=name,
            kind="agentic_rl",
            sources=[{"source": "world:terminal"}],
            steps=args.steps,
            groups_per_step=args.groups,
            group_size=2,
            tau=tau,
            sync_every=1,
            workers=args.workers,
            max_turns=16,
            max_new_tokens=16,
            context_budget=3072,
            micro_batch=8,
            checkpoint_every=10_000,
            optim={"lr": 1e-4, "warmup_steps": 0, "min_lr_ratio": 1.0, "weight_decay": 0.0},
        )
    )
    pools = {"terminal": world.tasks("terminal"), "math": world.tasks("reasoning")}
    orch = Orchestrator(
        pools,
        OrchestratorSettings(
            Mixture({"terminal": 1, "math": 1}),
            cfg.groups_per_step,
            cfg.group_size,
            cfg.tau,
            cfg.sync_every,
            seed=1,
        ),
    )
    orch.register(
        local_service("terminal", ["terminal"], lambda t: LongTailTerminal(args.step_s), 16)
    )
    orch.register(local_service("math", ["math"], env_factory(world), 16))
    engine = LocalEngine(model, pad_token_id=tok.pad_token_id, max_batch=64)
    workers = LocalWorkers(orch, engine, tok, cfg.agent(), cfg.workers)
    t0, cpu0 = time.monotonic(), _cpu()
    with tempfile.TemporaryDirectory() as out:
        rows = train_async_rl(
            model, orch, workers, cfg, Path(out), pad_id=tok.pad_token_id, desc=name
        )
    wall, cpu = time.monotonic() - t0, _cpu() - cpu0
    waited = sum(r["wait_s"] for r in rows)
    n = sum(r["trajectories"] for r in rows)
    return {
        "mode": name,
        "trajectories": n,
        "wall_s": wall,
        "traj_per_s": n / wall,
        "idle": waited / wall,
        "stale": rows[-1]["dropped_stale"],
        "partial": sum(r["partial"] for r in rows),
        "staleness_max": max(r["staleness_max"] for r in rows),
        "cpu_s": cpu,
        "merged": workers.gateway.requests / max(1, workers.gateway.calls),
        "sync_s": sum(r["sync_s"] for r in rows) / len(rows),
        "train_s": sum(r["train_s"] for r in rows) / len(rows),
    }


def _cpu() -> float:
    """CPU seconds used so far by this process and its (sandbox) children."""
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _clone(model: nn.Module) -> nn.Module:
    import copy

    return copy.deepcopy(model)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="4 steps per mode instead of 10")
    ap.add_argument("--steps", type=int, default=None, help="trainer steps per mode")
    ap.add_argument("--workers", type=int, default=8, help="rollout worker threads")
    ap.add_argument("--groups", type=int, default=8, help="groups per batch (half terminal)")
    ap.add_argument("--step-s", type=float, default=1.0, help="seconds per terminal round")
    args = ap.parse_args()
    args.steps = args.steps or (4 if args.quick else 10)
    os.environ.setdefault("ARCFORGE_PROGRESS", "0")
    torch.manual_seed(0)
    torch.set_num_threads(1)  # trainer and engine threads share the cores: no oversubscription
    world, tok, model = build()
    lengths = sorted(rounds_for(t.id) for t in world.tasks("terminal"))
    print(
        f"terminal rounds per task: median {statistics.median(lengths)}, "
        f"p90 {lengths[int(0.9 * len(lengths))]}, max {lengths[-1]} "
        f"({len(lengths)} tasks, {args.step_s}s each); math: 1 reply in process"
    )
    results = [
        run_mode("sync", 0, world, tok, model, args),
        run_mode("async", 2, world, tok, model, args),
    ]
    print(
        f"{'mode':6} {'trajs':>6} {'wall_s':>8} {'traj/s':>7} {'trainer_idle':>12} "
        f"{'stale_drop':>10} {'partial':>7} {'max_stale':>9} {'merge':>6} {'train_s':>7} "
        f"{'push_s':>6} {'cpu_s':>6}"
    )
    for r in results:
        print(
            f"{r['mode']:6} {r['trajectories']:6d} {r['wall_s']:8.1f} {r['traj_per_s']:7.2f} "
            f"{r['idle']:12.2f} {r['stale']:10d} {r['partial']:7d} {r['staleness_max']:9d} "
            f"{r['merged']:6.2f} {r['train_s']:7.2f} {r['sync_s']:6.2f} "
            f"{r['cpu_s']:6.1f}"
        )
    print(f"result: ratio={results[1]['traj_per_s'] / results[0]['traj_per_s']:.2f}")


if __name__ == "__main__":
    main()
