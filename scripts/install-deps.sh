#!/usr/bin/env bash
# Installs the Debian 12 packages needed to build, test and run backfilld and
# its demo. Idempotent: installs only what is missing (and runs apt-get update
# only then). Needs root when something is missing.
# Usage: scripts/install-deps.sh [PACKAGE...]
#   With arguments, only those packages (each one of the list below).
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config ccache
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libspdlog-dev prometheus-cpp-dev libsqlite3-dev libyaml-cpp-dev
  libgtest-dev libgmock-dev libcli11-dev libxxhash-dev libre2-dev libbenchmark-dev
  libcurl4-openssl-dev libssl-dev
  libcpp-httplib-dev  # the HTTP/JSON API and the console (--http-listen)
  libsystemd-dev  # sd_notify: readiness and stopping for Type=notify units
  libpq-dev postgresql-15  # tests start their own PostgreSQL server
  sqlite3 jq curl clang-format
  clang libclang-rt-14-dev  # the fuzz targets: clang++ and libFuzzer (fuzz/)
  openssl  # tests make their own TLS certificates
  python3  # the demo's revenue cache (examples/demo/revenue_cache.py)
  python3-grpcio python3-protobuf  # the Python client of the API tests
  golang-github-gogo-googleapis-dev  # google/rpc/*.proto: error details
  prometheus  # for promtool (metrics and alert-rule checks)
  chromium  # the console's browser tests (tests/browser/, puppeteer-core)
)

if (($# > 0)); then
  for pkg in "$@"; do
    [[ " ${PACKAGES[*]} " == *" $pkg "* ]] || {
      echo "install-deps: $pkg is not one of the packages this script installs" >&2
      exit 2
    }
  done
  PACKAGES=("$@")
fi

installed() {
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q '^install ok installed$'
}

missing=()
for pkg in "${PACKAGES[@]}"; do
  installed "$pkg" || missing+=("$pkg")
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#PACKAGES[@]} packages are installed"
  exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
  echo "install-deps: missing packages: ${missing[*]}" >&2
  echo "install-deps: run this script as root (e.g. sudo $0) or install them with:" >&2
  echo "  apt-get install --no-install-recommends ${missing[*]}" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive

# The prometheus and postgresql packages' maintainer scripts try to start
# their services (tests start servers of their own).
# Without systemd (containers, CI) invoke-rc.d would start the server in the
# background or wait on it; a policy-rc.d that denies every action (exit 101)
# makes the package install only its files. It is removed again afterwards
# unless one existed before.
policy=/usr/sbin/policy-rc.d
added_policy=0
if [[ ! -e $policy ]]; then
  printf '#!/bin/sh\n# installed by backfilld scripts/install-deps.sh\nexit 101\n' >"$policy"
  chmod 0755 "$policy"
  added_policy=1
fi
cleanup() {
  if ((added_policy)); then rm -f "$policy"; fi
}
trap cleanup EXIT

apt-get update -q
apt-get install -y -q --no-install-recommends \
  -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
  "${missing[@]}"

still_missing=()
for pkg in "${missing[@]}"; do
  installed "$pkg" || still_missing+=("$pkg")
done
if ((${#still_missing[@]} > 0)); then
  echo "install-deps: failed to install: ${still_missing[*]}" >&2
  exit 1
fi
echo "install-deps: done"
