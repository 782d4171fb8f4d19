# syntax=docker/dockerfile:1
#
# aicp production image: `python -m app serve` as a non-root user.
#
# Stage 1 ("builder") resolves the locked runtime dependencies with uv into /app/.venv and
# byte-compiles them; stage 2 copies only that venv and the service's own code onto a clean
# python:3.11-slim. uv, its cache, pip and the build context never reach the final image.
#
# kubesim is deliberately left out: the image runs `serve` against a real cluster (in-cluster
# config or KUBECONFIG) and a real PostgreSQL (DATABASE_URL). The simulator and the embedded
# database exist for `make run` / `python -m app dev` on a workstation, not for a cluster.
#
# No HEALTHCHECK: Kubernetes ignores it and probes /healthz and /readyz itself (see the chart).

ARG PYTHON_IMAGE=python:3.11-slim-bookworm
ARG UV_IMAGE=ghcr.io/astral-sh/uv:0.13.9

FROM ${UV_IMAGE} AS uv

FROM ${PYTHON_IMAGE} AS builder
COPY --from=uv /uv /usr/local/bin/uv
# Use the base image's interpreter (same path in both stages), copy files instead of
# hard-linking from a cache that is not copied, and compile bytecode once here: the final
# filesystem is read-only at run time.
ENV UV_PYTHON_DOWNLOADS=never \
    UV_PYTHON=/usr/local/bin/python3.11 \
    UV_LINK_MODE=copy \
    UV_COMPILE_BYTECODE=1 \
    UV_NO_CACHE=1 \
    UV_PROJECT_ENVIRONMENT=/app/.venv
WORKDIR /app
# Dependencies first, so a code-only change reuses this layer. `tool.uv.package = false`:
# the project itself is not installed, its code is copied next to the venv.
COPY pyproject.toml uv.lock ./
RUN uv sync --frozen --no-dev --no-group sim --no-install-project
COPY app/ ./app/
COPY sql/ ./sql/
RUN python -m compileall -q app

FROM ${PYTHON_IMAGE} AS runtime
LABEL org.opencontainers.image.title="aicp" \
      org.opencontainers.image.description="AI compute control plane: GPU batch workloads on Kubernetes with Kueue"
# A fixed numeric uid/gid, so Kubernetes can verify runAsNonRoot and the chart can name it.
# The base image's own pip/setuptools/wheel go too: nothing is installed at run time.
RUN groupadd --system --gid 10001 aicp \
    && useradd --system --uid 10001 --gid aicp --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin aicp \
    && python -m pip uninstall --yes --quiet pip setuptools wheel
ENV PATH=/app/.venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    AICP_HTTP_HOST=0.0.0.0 \
    AICP_HTTP_PORT=8080 \
    AICP_LOG_FORMAT=json
WORKDIR /app
# Root owns the code (the process cannot rewrite it); the service user only runs it.
COPY --from=builder /app/.venv /app/.venv
COPY --from=builder /app/app /app/app
COPY --from=builder /app/sql /app/sql
USER 10001:10001
EXPOSE 8080
ENTRYPOINT ["python", "-m", "app", "serve"]
