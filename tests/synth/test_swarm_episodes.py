"""Orchestrator SFT episodes: the scripted orchestrator over scripted search subagents, in the
real SwarmEnv and search environment, yields verified, grounded conversations."""

from arcforge.synth.swarm_episodes import swarm_episodes


def test_expert_orchestrator_episodes_are_verified_and_grounded(world, tok):
    demos, stats = swarm_episodes(world, tok, n=6)
    assert stats["episodes"] == 6 and stats["episodes_kept"] == len(demos) >= 4, stats
    for d in demos:
        assert d.kind == "swarm" and [t.name for t in d.tools] == [
            "create_subagent",
            "assign_task",
            "answer",
        ]
        asst = [m for m in d.messages if m.role == "assistant"]
        assert len(asst) == 2 and asst[0].tool_calls[0].name == "create_subagent"
        results = [m.content for m in d.messages if m.role == "tool"][1:-1]
        assert results and all(r.startswith("finder: ") for r in results)
