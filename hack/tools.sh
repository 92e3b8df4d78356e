#!/usr/bin/env bash
# Installs the pinned tools the build and tests need into bin/ (git-ignored).
#
# Every tool is built or installed once into a per-version cache directory outside
# the clone, ${XDG_CACHE_HOME:-$HOME/.cache}/cmp-injector/<tool>-<version>/, and
# bin/<tool> is a symlink to it, so fresh clones (CI) reuse earlier builds and a
# missing cache entry is simply rebuilt.
#
# Usage: hack/tools.sh [tool...]   (default: every tool)
# Tools: helm kustomize protoc protoc-gen-go protoc-gen-go-grpc etcd kube-apiserver kube-apiserver-1.32 benchstat
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN="$ROOT/bin"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/cmp-injector"
mkdir -p "$BIN" "$CACHE"
export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0

HELM_VERSION=v3.22.0
PROTOC_GEN_GO_VERSION=v1.36.12
PROTOC_GEN_GO_GRPC_VERSION=v1.6.2
ETCD_VERSION=v3.5.21
KUBE_VERSION=v1.34.4
KUBE_PREV_VERSION=v1.32.13
BENCHSTAT_VERSION=v0.0.0-20260908200009-22c9c6c9d4da
KUSTOMIZE_VERSION=v5.8.2

log() { printf 'tools: %s\n' "$*" >&2; }

# link NAME DIR: point bin/NAME at DIR/NAME.
link() { ln -sfn "$2/$1" "$BIN/$1"; }

# cached NAME VERSION BUILD-FUNCTION: run the build into the cache dir unless the
# binary is already there; the build writes to a temp dir first so an interrupted
# build never leaves a half-written binary that a later run would trust.
cached() {
  local name=$1 version=$2 build=$3 dir="$CACHE/$1-$2"
  if [ ! -x "$dir/$name" ]; then
    log "building $name $version into $dir"
    local tmp
    tmp=$(mktemp -d "$CACHE/.$name-XXXXXX")
    "$build" "$tmp" "$version"
    mkdir -p "$dir"
    mv "$tmp/$name" "$dir/$name"
    rm -rf "$tmp"
  fi
  link "$name" "$dir"
}

build_helm() {
  GOBIN=$1 go install -trimpath \
    -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$2" \
    "helm.sh/helm/v3/cmd/helm@$2"
}
build_protoc_gen_go() { GOBIN=$1 go install -trimpath "google.golang.org/protobuf/cmd/protoc-gen-go@$2"; }
build_protoc_gen_go_grpc() { GOBIN=$1 go install -trimpath "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$2"; }
build_benchstat() { GOBIN=$1 go install -trimpath "golang.org/x/perf/cmd/benchstat@$2"; }
build_kustomize() { GOBIN=$1 go install -trimpath "sigs.k8s.io/kustomize/kustomize/v5@$2"; }

# etcd and kube-apiserver come from their own modules under test/e2e/tools so that
# the project's go.mod never requires them.
build_etcd() {
  (cd "$ROOT/test/e2e/tools/etcd" &&
    go build -trimpath -ldflags '-s -w' -o "$1/etcd" go.etcd.io/etcd/server/v3)
}
build_kube_apiserver() { build_kube_apiserver_from "$ROOT/test/e2e/tools/kube-apiserver" "$1/kube-apiserver" "$2"; }
build_kube_apiserver_prev() { build_kube_apiserver_from "$ROOT/test/e2e/tools/kube-apiserver-1.32" "$1/kube-apiserver-1.32" "$2"; }
build_kube_apiserver_from() {
  local mod=$1 out=$2 v=$3 minor
  minor=$(echo "$v" | cut -d. -f2)
  local ldf="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldf="$ldf -X $pkg.gitVersion=$v -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  done
  (cd "$mod" && go build -trimpath -ldflags "$ldf" -o "$out" k8s.io/kubernetes/cmd/kube-apiserver)
}

# protoc comes from Debian: the Go module proxy does not serve it.
install_protoc() {
  if ! command -v protoc >/dev/null 2>&1 || [ ! -f /usr/include/google/protobuf/empty.proto ]; then
    log "installing Debian protobuf-compiler"
    if [ "$(id -u)" = 0 ]; then
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq protobuf-compiler >/dev/null
    else
      sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq protobuf-compiler >/dev/null
    fi
  fi
  ln -sfn "$(command -v protoc)" "$BIN/protoc"
}

one() {
  case $1 in
  helm) cached helm "$HELM_VERSION" build_helm ;;
  protoc) install_protoc ;;
  protoc-gen-go) cached protoc-gen-go "$PROTOC_GEN_GO_VERSION" build_protoc_gen_go ;;
  protoc-gen-go-grpc) cached protoc-gen-go-grpc "$PROTOC_GEN_GO_GRPC_VERSION" build_protoc_gen_go_grpc ;;
  etcd) cached etcd "$ETCD_VERSION" build_etcd ;;
  kube-apiserver) cached kube-apiserver "$KUBE_VERSION" build_kube_apiserver ;;
  kube-apiserver-1.32) cached kube-apiserver-1.32 "$KUBE_PREV_VERSION" build_kube_apiserver_prev ;;
  benchstat) cached benchstat "$BENCHSTAT_VERSION" build_benchstat ;;
  kustomize) cached kustomize "$KUSTOMIZE_VERSION" build_kustomize ;;
  *) log "unknown tool $1"; exit 2 ;;
  esac
}

if [ $# = 0 ]; then
  set -- helm kustomize protoc protoc-gen-go protoc-gen-go-grpc etcd kube-apiserver kube-apiserver-1.32
fi
for t in "$@"; do one "$t"; done
