"""The built-in sandbox profile of the TypeScript boundary worker.

docs/ARCHITECTURE.md, "TypeScript boundary": the worker runs under a profile of the
service's own, which no policy id, plan or interface can select: no network, no
environment, the read-only materialization plus the verified worker and pinned compiler,
and the fixed budgets below. Its id carries the reserved ``builtin.`` prefix, which a
policy file may not use and ``find_policy`` refuses.
"""

from __future__ import annotations

from probe_service.policies.model import RESERVED_POLICY_PREFIX, Policy

__all__ = [
    "BOUNDARY_PROFILE",
    "HEAP_MIB",
    "MAX_INPUT_BYTES",
    "MAX_INPUT_FILES",
    "MAX_OUTPUT_BYTES",
]

#: Compiler input caps: files and bytes of the materialized TypeScript inputs.
MAX_INPUT_FILES = 10_000
MAX_INPUT_BYTES = 64 * 1024 * 1024
#: The V8 old-space ceiling of the worker (``--max-old-space-size``).
HEAP_MIB = 384
#: The one live budget stdout and stderr share.
MAX_OUTPUT_BYTES = 4 * 1024 * 1024

BOUNDARY_PROFILE = Policy(
    id=f"{RESERVED_POLICY_PREFIX}typescript-boundary",
    allowed_executables=("node",),
    timeout_seconds=300,
    max_output_bytes=MAX_OUTPUT_BYTES,
    allowed_domains=(),
    environment=(),
    # V8's heap ceiling is HEAP_MIB; the cgroup bounds the whole process (young
    # generation, code, buffers) above it.
    memory_bytes=1024 * 1024 * 1024,
    max_processes=64,
    scratch_bytes=16 * 1024 * 1024,
    scratch_inodes=1024,
)
