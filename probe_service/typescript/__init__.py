"""The TypeScript boundary: an isolated compiler worker over a materialized snapshot.

docs/ARCHITECTURE.md, "TypeScript boundary". Import the parts from their modules
(``boundary``, ``claims``, ``install``, ``profile``); this package imports nothing eagerly,
so the claims part can reach it without a cycle.
"""
