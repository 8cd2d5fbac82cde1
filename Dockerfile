# The byte-probe image: the service, the pinned Sandbox Runtime, and the tools it needs.
# Workers run probes under bubblewrap, so the container needs user namespaces
# (see security_opt in compose.yaml).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    BYTE_PROBE_SANDBOX_DIR=/app/sandbox \
    BYTE_PROBE_TSBOUNDARY_DIR=/app/tsboundary

RUN apt-get update \
    && apt-get install -y --no-install-recommends bubblewrap socat ripgrep nodejs npm git \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /app

# The pinned runtime first: its layer changes only with the lock file.
COPY sandbox/package.json sandbox/package-lock.json sandbox/runtime.sha256 sandbox/
RUN cd sandbox && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
# The TypeScript boundary worker and its pinned compiler, verified the same way.
COPY tsboundary/package.json tsboundary/package-lock.json tsboundary/worker.sha256 \
    tsboundary/boundary.cjs tsboundary/routes.cjs tsboundary/positions.cjs tsboundary/
RUN cd tsboundary && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error

COPY pyproject.toml README.md ./
COPY probe_service probe_service
RUN pip install .

# Probes never run as root.
RUN useradd --create-home --uid 10001 probe && mkdir -p /var/lib/byte-probe \
    && chown probe /var/lib/byte-probe
USER probe
WORKDIR /var/lib/byte-probe

ENTRYPOINT ["byte-probe"]
CMD ["--help"]
