#!/usr/bin/env bash
# Install the system tools the sandbox and snapshots need: bubblewrap, socat, ripgrep, git;
# iproute2's `ip` creates the network test host of tests/security; chromium runs the web
# view's browser tests (tests/web); stress-ng keeps both cores busy for the suite's
# under-load run (README, "Development"); systemd's `systemd-analyze verify` checks the host
# units of examples/systemd (tests/deploy).
# Idempotent: does nothing when every tool is already in a fixed system directory.
set -euo pipefail

need=()
for tool in bwrap:bubblewrap socat:socat rg:ripgrep git:git node:nodejs npm:npm ip:iproute2 \
    chromium:chromium stress-ng:stress-ng systemd-analyze:systemd; do
    bin=${tool%%:*}; pkg=${tool##*:}
    found=no
    for dir in /usr/bin /bin /usr/local/bin /usr/sbin /sbin; do
        [ -x "$dir/$bin" ] && found=yes && break
    done
    [ "$found" = yes ] || need+=("$pkg")
done

if [ ${#need[@]} -eq 0 ]; then
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing system packages: ${need[*]}" >&2
    echo "setup: install them with: sudo apt-get install -y ${need[*]}" >&2
    exit 1
fi
echo "setup: installing ${need[*]} with apt-get"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "${need[@]}" >/dev/null
