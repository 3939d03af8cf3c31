"""The world's knowledge: invented names, the knowledge graph, the web pages rendered from it
and the tools that answer from both (lookup, calculator, search, open_page)."""
