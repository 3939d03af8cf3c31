"""The world's tasks: each suite's train and held-out pools (`pools`) and the generators they
draw from (questions over the graph, constrained chat, arithmetic problems, long context,
terminal scenarios), plus the task families generated on demand (chained coding, repository
exploration, wide search, slide decks)."""
