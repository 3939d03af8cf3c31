"""The world's code: a compositional space of small Python functions, the repositories built
from it, their bug mutations and hidden tests, source helpers for the SWE tools, and small
front-end projects for the agent-as-a-judge."""
