# syntax=docker/dockerfile:1
# backfilld container image.
#   docker build -t backfilld .
#   docker run -d --name backfilld -p 50051:50051 -p 9464:9464 \
#     -v backfilld-data:/var/lib/backfilld \
#     -v "$PWD/pipelines:/etc/backfilld/pipelines:ro" backfilld
# `docker stop` sends SIGTERM: the daemon drains and exits 0.

# --- build -------------------------------------------------------------------
FROM debian:bookworm AS build
ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      build-essential cmake pkg-config \
      libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler \
      libabsl-dev libspdlog-dev prometheus-cpp-dev libsqlite3-dev \
      libyaml-cpp-dev libcli11-dev libxxhash-dev libsystemd-dev \
      libcurl4-openssl-dev libssl-dev libpq-dev \
      golang-github-gogo-googleapis-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DBACKFILL_BUILD_TESTS=OFF -DBACKFILL_BUILD_BENCH=OFF \
 && cmake --build build --target backfilld backfillctl -j"$(nproc)" \
 && strip --strip-debug build/bin/backfilld build/bin/backfillctl

# --- runtime -----------------------------------------------------------------
FROM debian:bookworm-slim
ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      libgrpc++1.51 libgrpc29 libprotobuf32 libabsl20220623 \
      libspdlog1.10 libfmt9 \
      libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0 \
      libsqlite3-0 libyaml-cpp0.7 libxxhash0 libsystemd0 \
      libcurl4 libssl3 libpq5 ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --user-group \
      --home-dir /var/lib/backfilld --shell /usr/sbin/nologin backfilld \
 && install -d -o backfilld -g backfilld -m 0750 /var/lib/backfilld \
 && install -d -m 0755 /etc/backfilld/pipelines

COPY --from=build /src/build/bin/backfilld /src/build/bin/backfillctl /usr/local/bin/
# The demo pipeline as a default; mount your own directory over it.
COPY examples/demo/pipelines/ /etc/backfilld/pipelines/
# Fail the image build if a shared library is missing.
RUN ! ldd /usr/local/bin/backfilld /usr/local/bin/backfillctl | grep 'not found'

USER backfilld
VOLUME /var/lib/backfilld
EXPOSE 50051 9464
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=30s --timeout=10s --start-period=20s \
  CMD ["backfillctl", "--server", "127.0.0.1:50051", "datasets"]
# The container listens on all its interfaces so that a published port
# reaches it; backfilld's gRPC port is plaintext, so that takes --insecure.
# Publish it on the host's loopback (`-p 127.0.0.1:50051:50051`) or behind a
# proxy that terminates TLS, and require tokens: mount a token file and add
# `--auth-tokens /etc/backfilld/tokens.yaml` (docs/security.md). The health
# check then needs a viewer's token: `docker run -e BACKFILL_TOKEN=...`.
ENTRYPOINT ["backfilld", "--data-dir", "/var/lib/backfilld", \
            "--pipelines", "/etc/backfilld/pipelines", \
            "--listen", "0.0.0.0:50051", "--metrics-listen", "0.0.0.0:9464", \
            "--insecure"]
# Extra flags, e.g. `docker run backfilld --workers 8`. `docker stop` waits
# 10 s before SIGKILL: the drain timeout stays below that (or raise both,
# `docker run --stop-timeout 60 ... --drain-timeout 50`).
CMD ["--workers", "4", "--drain-timeout", "8"]
