"""Rollout side: inference engines (in-process and OpenAI-compatible server), agent loop."""

from arcforge.rollout.engine import (
    Completion,
    Engine,
    LocalEngine,
    SamplingParams,
    ServerEngine,
)

__all__ = ["Completion", "Engine", "LocalEngine", "SamplingParams", "ServerEngine"]
