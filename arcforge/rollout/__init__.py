"""Rollout side: inference engines (in-process and OpenAI-compatible server), agent loop."""

from arcforge.rollout.engines.base import Completion, Engine, SamplingParams
from arcforge.rollout.engines.http import ServerEngine
from arcforge.rollout.engines.local import LocalEngine

__all__ = ["Completion", "Engine", "LocalEngine", "SamplingParams", "ServerEngine"]
