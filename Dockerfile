# The t9k-jobs operator image: the distribution and its bundled plugins, run as a non-root user,
# fit for a read-only root filesystem. Build from the repository root:
#   docker build -t t9k-jobs:0.1.0 .
# Third-party plugins go into a derived image with one `pip install` (docs/install.md).

FROM python:3.11-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
# A virtualenv, copied whole into the runtime stage: the runtime gets no build leftovers, and a
# derived image installs plugins into it with its own pip.
RUN python -m venv /opt/t9kjobs
WORKDIR /src
COPY pyproject.toml README.md ./
COPY core core
COPY plugins plugins
# Not editable: the runtime stage has no source tree. pip compiles the bytecode here, so
# nothing is written at run time.
RUN /opt/t9kjobs/bin/pip install --no-cache-dir . \
    && /opt/t9kjobs/bin/t9kjobs plugins

FROM python:3.11-slim-bookworm
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
