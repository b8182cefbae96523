# The t9k-jobs operator image: the distribution and its bundled plugins, run as a non-root user,
# fit for a read-only root filesystem. Build from the repository root:
#   docker build -t t9k-jobs:0.2.0 .
# Third-party plugins go into a derived image with one `pip install` (docs/install.md).
# BASE: any Debian bookworm image; one without Python (a bare root filesystem, as
# hack/images/build.sh builds from with no registry) gets Debian's python3. The default is
# pinned by digest (the multi-platform index of python:3.11-slim-bookworm, Python 3.11.16, as
# docker-library/repo-info recorded it at commit 33a22f41ac7b): a tag moves, a digest does not.
# To move to a newer one: `docker buildx imagetools inspect python:3.11-slim-bookworm`.

ARG BASE=python:3.11-slim-bookworm@sha256:0bee7276f83efd4a1ee05bbbf4281d95ed28e079220a9457f25a93e3f1e3c31b
FROM ${BASE} AS python
# hadolint ignore=DL3008
RUN command -v python3 >/dev/null \
    || { apt-get update \
         && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 python3-venv \
         && rm -rf /var/lib/apt/lists/*; }

FROM python AS build
# A CA bundle for pip behind a TLS-inspecting proxy (a path the build mounts); empty: pip's own.
ARG PIP_CERT=
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
# A virtualenv, copied whole into the runtime stage: the runtime gets no build leftovers, and a
# derived image installs plugins into it with its own pip.
RUN python3 -m venv /opt/t9kjobs
WORKDIR /src
COPY pyproject.toml README.md requirements.lock ./
COPY core core
COPY plugins plugins
# The dependencies first: the closure requirements.lock pins, each file checked against the
# hash it gives (--require-hashes: pip refuses any other file, and any package not in the
# lock); setuptools, the build backend, is one of them. Then the project itself with nothing
# more from the index (--no-index, --no-deps, --no-build-isolation), and `pip check` that the
# lock satisfies it. Not editable: the runtime stage has no source tree. pip compiles the
# bytecode here, so nothing is written at run time.
RUN /opt/t9kjobs/bin/pip install --no-cache-dir ${PIP_CERT:+--cert "$PIP_CERT"} \
        --require-hashes -r requirements.lock \
    && /opt/t9kjobs/bin/pip install --no-cache-dir --no-index --no-deps --no-build-isolation . \
    && /opt/t9kjobs/bin/pip check \
    && /opt/t9kjobs/bin/t9kjobs plugins

FROM python
LABEL org.opencontainers.image.title="t9k-jobs" \
      org.opencontainers.image.description="Operator for distributed training jobs, with its bundled plugins" \
      org.opencontainers.image.licenses="Apache-2.0"
# Bytecode is compiled at build time; the root filesystem may be read-only at run time.
ENV PATH=/opt/t9kjobs/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
COPY --from=build /opt/t9kjobs /opt/t9kjobs
# A numeric non-root user (the chart runs the pod as 65532 with runAsNonRoot): the code belongs
# to root and cannot be changed by the process that runs it.
USER 65532:65532
EXPOSE 8080 8081
ENTRYPOINT ["t9kjobs", "operator"]
CMD ["--leader-elect", "--metrics-bind-address=:8080", "--health-probe-bind-address=:8081"]
