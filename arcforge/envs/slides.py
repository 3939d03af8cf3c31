"""SlidesEnv: topic + outline -> one HTML deck, scored by rendering it in headless Chromium.

Single turn, like MathEnv: reset(task) gives the task's instruction (topic, outline, assets,
design rules); the first assistant message is the deck and ends the episode; verify() runs the
three-level slide reward (arcforge.rewards.slides): static markup, runtime rendering, visual
balance, gated by outline coverage. Rendering uses this thread's shared browser, so every env
made in a thread shares one Chromium.
"""

from __future__ import annotations

from arcforge.envs.base import StepResult
from arcforge.rewards.slides import deck_reward
from arcforge.rewards.slides_render import SlideRenderer
from arcforge.types import Message, Reward, Task, Tool


class SlidesEnv:
    """Single-turn slide-deck environment.

    Args:
        system_prompt: an optional system message put before the task.
        renderer: a SlideRenderer to share (default: one on this thread's shared browser).
    """

    def __init__(self, system_prompt: str | None = None,
                 renderer: SlideRenderer | None = None) -> None:  # fmt: skip
        self.system_prompt = system_prompt
        self.renderer = renderer
        self.tools: list[Tool] = []
        self._task: Task | None = None
        self._reply: str | None = None

    def reset(self, task: Task) -> list[Message]:
        missing = [k for k in ("outline", "assets", "design") if k not in task.context]
        if task.kind != "slides" or missing:
            raise ValueError(f"task {task.id}: SlidesEnv needs a slides task with context "
                             f"outline, assets and design (missing: {missing or 'kind'})")  # fmt: skip
        self._task, self._reply = task, None
        msgs = [Message("system", self.system_prompt)] if self.system_prompt else []
        return msgs + [Message("user", task.instruction)]

    def step(self, message: Message) -> StepResult:
        self._reply = message.content
        return StepResult(observations=[], done=True)

    def verify(self) -> Reward:
        if self._task is None:
            raise RuntimeError("SlidesEnv.verify called before reset")
        if not self._reply:
            return Reward(0.0, {"problems": ["no reply"]})
        if self.renderer is None:
            self.renderer = SlideRenderer()
        return deck_reward(self._reply, self._task, self.renderer)

    def close(self) -> None:
        pass
