# The byte-probe image: the service, the pinned Sandbox Runtime, and the tools it needs.
# One image for every service of compose.yaml: the worker runs as root (it starts each probe
# as its own unprivileged slot uid, 61000+N, and needs the grants compose.yaml documents);
# migrate and web run as the unprivileged `probe` account (uid/gid 10001). The policy file
# and the signing key are mounted at run time, never copied in (.dockerignore keeps them out
# of the build context too).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    BYTE_PROBE_SANDBOX_DIR=/app/sandbox \
    BYTE_PROBE_TSBOUNDARY_DIR=/app/tsboundary

# util-linux: setpriv, unshare, nsenter and prlimit, which every launch uses.
RUN apt-get update \
    && apt-get install -y --no-install-recommends bubblewrap socat ripgrep nodejs npm git util-linux \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /app

# The pinned runtime first: its layer changes only with the lock file.
COPY sandbox/package.json sandbox/package-lock.json sandbox/runtime.sha256 sandbox/
RUN cd sandbox && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
# Our own files beside it, in the trusted launcher (runtime.sha256 covers them too).
COPY sandbox/net-guard.cjs sandbox/launcher.mjs sandbox/bwrap-guard.sh sandbox/
# The TypeScript boundary worker and its pinned compiler, verified the same way.
COPY tsboundary/package.json tsboundary/package-lock.json tsboundary/worker.sha256 \
    tsboundary/boundary.cjs tsboundary/routes.cjs tsboundary/positions.cjs tsboundary/
RUN cd tsboundary && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error

COPY pyproject.toml README.md ./
COPY probe_service probe_service
RUN pip install .

COPY scripts/docker-entrypoint.sh /usr/local/bin/byte-probe-entrypoint

# The unprivileged account of every service but the worker. The worker's state (the runtime
# copy, the warm snapshot cache, run directories: TMPDIR) lives under /var/lib/byte-probe,
# root's and traversable, so each run's slot uid reaches its own 0710 run directory.
RUN groupadd --gid 10001 probe \
    && useradd --uid 10001 --gid 10001 --create-home probe \
    && install -d -m 0755 -o root -g root /var/lib/byte-probe /var/lib/byte-probe/tmp \
    && chmod 0755 /usr/local/bin/byte-probe-entrypoint

# Root, for the worker; the entrypoint drops every other command to `probe`.
USER root
WORKDIR /var/lib/byte-probe

ENTRYPOINT ["/usr/local/bin/byte-probe-entrypoint"]
CMD ["--help"]
