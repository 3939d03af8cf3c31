"""SlidesEnv: topic + outline -> one HTML deck, scored by rendering it in headless Chromium.

Single turn, like MathEnv: reset(task) gives the task's instruction (topic, outline, assets,
design rules); the first assistant message is the deck and ends the episode; verify() runs the
three-level slide reward (arcforge.rewards.slides): static markup, runtime rendering, visual
balance, gated by outline coverage. Rendering uses this thread's shared browser, so every env
made in a thread shares one Chromium.
"""

from __future__ import annotations

from arcforge.envs.base import Env
from arcforge.rewards.slides import deck_reward
from arcforge.rewards.slides_render import SlideRenderer
from arcforge.types import Reward, Task


class SlidesEnv(Env):
    """Single-turn slide-deck environment.

    Args:
        system_prompt: an optional system message put before the task.
        renderer: a SlideRenderer to share (default: one on this thread's shared browser).
    """

    single_turn = True

    def __init__(
        self, system_prompt: str | None = None, renderer: SlideRenderer | None = None
    ) -> None:
        super().__init__(system_prompt)
        self.renderer = renderer

    def check(self, task: Task) -> None:
        missing = [k for k in ("outline", "assets", "design") if k not in task.context]
        if task.kind != "slides" or missing:
            raise ValueError(
                f"task {task.id}: SlidesEnv needs a slides task with context "
                f"outline, assets and design (missing: {missing or 'kind'})"
            )

    def verify(self) -> Reward:
        if self.task is None:
            raise RuntimeError("SlidesEnv.verify called before reset")
        reply, task = self.reply, self.task
        if not reply:
            return Reward(0.0, {"problems": ["no reply"]})
        if self.renderer is None:
            self.renderer = SlideRenderer()
        return deck_reward(reply, task, self.renderer)
