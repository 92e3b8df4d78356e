#!/usr/bin/env bash
# Regenerates the Go code of the gRPC services (cmpserver/pluginpb, cmpserver/askpass/askpasspb) with
# the pinned generators in bin/ (hack/tools.sh installs them). CI runs
# `hack/proto.sh && git diff --exit-code` to catch stale generated code.
#
# The output must be byte-identical on every machine: protoc runs from the
# repository root with relative paths (so no absolute path is embedded), and the
# "protoc vX" line the generators copy into their headers is removed, because
# protoc itself comes from the distribution and is not pinned. The generator
# versions (pinned) stay in the headers.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
BIN="$ROOT/bin"
for tool in protoc protoc-gen-go protoc-gen-go-grpc; do
  if [ ! -x "$BIN/$tool" ]; then
    echo "proto: $BIN/$tool missing; run hack/tools.sh $tool" >&2
    exit 1
  fi
done

# The plugin service, and Argo CD's askpass service (the plugin server is its
# client when git in a plugin asks for credentials).
for OUT in cmpserver/pluginpb cmpserver/askpass/askpasspb; do
  PATH="$BIN:$PATH" "$BIN/protoc" -I . \
    --go_out=. --go_opt=paths=source_relative \
    --go-grpc_out=. --go-grpc_opt=paths=source_relative \
    "$OUT"/*.proto
  for f in "$OUT"/*.pb.go; do
    sed -i -e '/^\/\/ \tprotoc  *v/d' -e '/^\/\/ - protoc  *v/d' "$f"
  done
done
