"""Environments and the sandbox their commands run in.

Import from the submodules (`from arcforge.envs.sandbox import open_sandbox`); this package
file stays import-free so that each environment module loads only what it needs.
"""
