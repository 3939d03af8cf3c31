"""Environments: tasks in, opening messages, tool calls executed, episodes graded.

Import from the submodules (`from arcforge.envs.terminal_env import TerminalEnv`); this package
file stays import-free so that each environment module loads only what it needs. The sandbox
their commands run in is its own package, `arcforge.sandbox`, which imports nothing else of
arcforge.
"""
