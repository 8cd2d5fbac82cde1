#!/usr/bin/env bash
# Install the pinned Anthropic Sandbox Runtime from sandbox/package-lock.json with `npm ci`.
# Idempotent: reinstalls only when the lock file is newer than the installed tree.
set -euo pipefail
dir="$(dirname "$0")/../sandbox"
[ -f "$dir/package-lock.json" ] || exit 0
cd "$dir"
# The stamp lives outside node_modules: the runtime digest covers that whole tree.
stamp=.npm-ci-stamp
if [ -f "$stamp" ] && [ "$stamp" -nt package-lock.json ]; then
    exit 0
fi
npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
touch "$stamp"
