"""The claims part's digests, by the names its modules use: the canonical ones.

Baselines, records and audit entries hash exactly as ids and commitments do
(``canonical.py``: sorted keys, compact, UTF-8), so there is one encoder, not two.
"""

from __future__ import annotations

from ..canonical import sha256_hex as digest_bytes
from ..canonical import sha256_of_json as digest_json

__all__ = ["digest_bytes", "digest_json"]
