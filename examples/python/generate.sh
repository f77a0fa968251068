#!/usr/bin/env bash
# Generates the Python modules of backfilld's API into OUT_DIR: the
# messages and stubs of backfill.v1 (backfill/v1/backfill_pb2.py,
# backfill_pb2_grpc.py, nodes_pb2.py) and of the google.rpc error model its
# errors carry (google/rpc/status_pb2.py, error_details_pb2.py).
# Usage: examples/python/generate.sh OUT_DIR
# Needs protoc and grpc_python_plugin (Debian: protobuf-compiler,
# protobuf-compiler-grpc) and the google/rpc protos (Debian:
# golang-github-gogo-googleapis-dev; or set GOOGLEAPIS_PROTO_DIR).
set -euo pipefail

out="${1:?usage: $0 OUT_DIR}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
googleapis="${GOOGLEAPIS_PROTO_DIR:-/usr/share/gocode/src/github.com/gogo/googleapis}"
plugin="$(command -v grpc_python_plugin || echo /usr/bin/grpc_python_plugin)"

mkdir -p "$out"
protoc -I "$root/proto" -I "$googleapis" \
  --python_out="$out" --grpc_python_out="$out" \
  --plugin=protoc-gen-grpc_python="$plugin" \
  backfill/v1/backfill.proto backfill/v1/nodes.proto
protoc -I "$googleapis" --python_out="$out" \
  google/rpc/status.proto google/rpc/error_details.proto
