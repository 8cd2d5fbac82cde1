"""The TypeScript boundary: an isolated compiler worker over a materialized snapshot.

docs/ARCHITECTURE.md, "TypeScript boundary". Import the parts from their modules
(``analyzer``, ``boundary``, ``claims``, ``install``, ``profile``). It builds on the claims
part, which reaches it only through the ``BoundaryAnalyzer`` a session hands in
(``analyzer.py``; docs/ARCHITECTURE.md, "Layers").
"""
