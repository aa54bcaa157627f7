# osc-gitops container: `osc-gitops run` (Deployment) or `osc-gitops run --once` (CronJob).
#
# - Base pinned by digest (python:3.11-slim-bookworm). Refresh it deliberately:
#     docker buildx imagetools inspect python:3.11-slim-bookworm   # copy the index digest
# - Non-root (uid 65532), works with readOnlyRootFilesystem: everything it writes goes to
#   /var/cache/osc-gitops (clone cache, status file) and /tmp (HOME), both volumes in deploy/.
# - git + openssh-client: GitPython drives the git binary (https token / ssh key sources).
ARG PYTHON_IMAGE=python:3.11-slim-bookworm@sha256:a36c24f9cbdf4fd0f52d67f0823eeac19c2028c637cecc392d97f980d4fec56b

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY reconciler ./reconciler
RUN python -m venv /opt/osc-gitops \
 && /opt/osc-gitops/bin/pip install . \
 && /opt/osc-gitops/bin/osc-gitops --version

FROM ${PYTHON_IMAGE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends git openssh-client ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 65532 osc \
 && useradd --uid 65532 --gid 65532 --home-dir /tmp --no-create-home --shell /usr/sbin/nologin osc \
 && install -d -o 65532 -g 65532 /var/cache/osc-gitops
COPY --from=build /opt/osc-gitops /opt/osc-gitops
ENV PATH=/opt/osc-gitops/bin:$PATH \
    HOME=/tmp \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    OSC_CACHE_DIR=/var/cache/osc-gitops
USER 65532:65532
EXPOSE 9090
ENTRYPOINT ["osc-gitops"]
CMD ["run", "--help"]
