#!/usr/bin/env bash
# Install the pinned Anthropic Sandbox Runtime (sandbox/) and the pinned TypeScript compiler
# of the boundary worker (tsboundary/) from their package-lock.json files with `npm ci`.
# Idempotent: reinstalls only when a lock file is newer than its installed tree.
set -euo pipefail
root="$(dirname "$0")/.."
for dir in "$root/sandbox" "$root/tsboundary"; do
    [ -f "$dir/package-lock.json" ] || continue
    (
        cd "$dir"
        # The stamp lives outside node_modules: the digests cover that whole tree.
        stamp=.npm-ci-stamp
        if [ -f "$stamp" ] && [ "$stamp" -nt package-lock.json ]; then
            exit 0
        fi
        npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
        touch "$stamp"
    )
done
