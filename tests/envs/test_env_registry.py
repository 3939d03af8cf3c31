"""The environment registry: a kind registered from user code is made by `make_env` and
`env_factory` like a built-in one, with the caller's options; an unknown kind names the known."""

from __future__ import annotations

import pytest

from arcforge.envs import registry
from arcforge.envs.registry import env_factory, make_env, register_env
from arcforge.types import Task


class EchoEnv:
    def __init__(self, greeting: str = "hi") -> None:
        self.greeting = greeting


def test_a_registered_kind_gets_its_environment_with_the_callers_options(monkeypatch):
    monkeypatch.setattr(registry, "FACTORIES", dict(registry.FACTORIES))  # left as it was
    task = Task("e-1", "echo", "say something")
    with pytest.raises(ValueError, match="no environment for kind 'echo'; known: .*math"):
        make_env(task)
    register_env("echo", lambda task, world, **kw: EchoEnv(**kw))
    assert make_env(task).greeting == "hi"
    assert env_factory(None, echo={"greeting": "hello"})(task).greeting == "hello"
