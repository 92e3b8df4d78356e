#!/usr/bin/env bash
# Installs the pinned tools the build and tests need into bin/ (git-ignored).
#
# Every tool is built or installed once into a per-version cache directory outside
# the clone, ${XDG_CACHE_HOME:-$HOME/.cache}/cmp-injector/<tool>-<version>/, and
# bin/<tool> is a symlink to it, so fresh clones (CI) reuse earlier builds and a
# missing cache entry is simply rebuilt.
#
# Usage: hack/tools.sh [tool...]   (default: every tool)
# Tools: helm kustomize protoc protoc-gen-go protoc-gen-go-grpc etcd
#        kube-apiserver kube-controller-manager kube-apiserver-1.32 kube-controller-manager-1.32
#        argocd repoclient argocd-v2 repoclient-v2 redis-server actionlint promtool benchstat cmpbench
#        argocd-operator
#        jsonnet sops helmfile argocd-vault-plugin ytt tk cdk8s (the plugin library) age-keygen vault (their tests)
#        kubelet containerd runc cni-plugins iptables busybox (the real node)
#        argo-e2e.test kubectl goreman nginx fcgiwrap sshd gpg (Argo CD's own plugin tests: make e2e-argo)
#        kwok (the suite's simulated node)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN="$ROOT/bin"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/cmp-injector"
mkdir -p "$BIN" "$CACHE"
export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0

PROTOC_GEN_GO_VERSION=v1.36.12
PROTOC_GEN_GO_GRPC_VERSION=v1.6.2
ETCD_VERSION=v3.5.21
# The newest Kubernetes the Go module proxy serves that builds and passes here,
# and one old release; the real node's kubelet is pinned apart (KUBELET_VERSION:
# test/e2e/tools/kubelet/tools.go says why).
KUBE_VERSION=v1.37.2
KUBE_PREV_VERSION=v1.32.13
KUBELET_VERSION=v1.34.4
GOREMAN_VERSION=v0.3.16
KWOK_VERSION=v0.8.0
BENCHSTAT_VERSION=v0.0.0-20260908200009-22c9c6c9d4da
# shellcheck source=hack/versions.sh
. "$ROOT/hack/versions.sh"

log() { printf 'tools: %s\n' "$*" >&2; }

# link NAME DIR: point bin/NAME at DIR/NAME.
link() { ln -sfn "$2/$1" "$BIN/$1"; }

# cached NAME VERSION BUILD-FUNCTION [FILE...]: run the build into the cache dir
# unless the binary (and every FILE the build also installs) is already there; the
# build writes to a temp dir first so an interrupted build never leaves a
# half-written binary that a later run would trust.
# A build whose flags change without its version (BUILD_KEY set for the call)
# gets a cache dir of its own.
cached() {
  local name=$1 version=$2 build=$3 dir="$CACHE/$1-$2${BUILD_KEY:+-$BUILD_KEY}" f missing=""
  shift 3
  for f in "$name" "$@"; do [ -x "$dir/$f" ] || missing=1; done
  if [ -n "$missing" ]; then
    log "building $name $version into $dir (once; later runs reuse it)"
    local tmp start=$SECONDS
    tmp=$(mktemp -d "$CACHE/.$name-XXXXXX")
    "$build" "$tmp" "$version"
    mkdir -p "$dir"
    for f in "$name" "$@"; do mv "$tmp/$f" "$dir/$f"; done
    rm -rf "$tmp"
    log "built $name $version in $((SECONDS - start))s"
  fi
  link "$name" "$dir"
}

# helm and kustomize go into plugin images too: hack/images builds them with the
# same flags (its toolSpec), and TestToolBuildsMatchToolsSh keeps the two equal.
# The -X flags are helm's own release build's (its Makefile), but for the git
# commit and tree state, which a module from the proxy does not carry.
build_helm() {
  GOBIN=$1 go install -trimpath \
    -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$2 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=$HELM_KUBE_MAJOR -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$HELM_KUBE_MINOR -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=$HELM_KUBE_MAJOR -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$HELM_KUBE_MINOR" \
    "$HELM_PKG@$2"
}
build_protoc_gen_go() { GOBIN=$1 go install -trimpath "google.golang.org/protobuf/cmd/protoc-gen-go@$2"; }
build_protoc_gen_go_grpc() { GOBIN=$1 go install -trimpath "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$2"; }
build_benchstat() { GOBIN=$1 go install -trimpath "golang.org/x/perf/cmd/benchstat@$2"; }
# promtool from its own module (Prometheus's go.mod has a replace directive).
build_promtool() {
  (cd "$ROOT/test/observability/promtool" && go build -trimpath -ldflags '-s -w' -o "$1/promtool" github.com/prometheus/prometheus/cmd/promtool)
}
build_actionlint() { GOBIN=$1 go install -trimpath "github.com/rhysd/actionlint/cmd/actionlint@$2"; }
# golangci-lint's authors advise against go install because it resolves the
# dependencies anew; -mod=mod with the module's own go.sum pins them the same.
build_golangci_lint() {
  GOBIN=$1 go install -trimpath -ldflags "-s -w -X main.version=${2#v}" \
    "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$2"
}
build_kustomize() { GOBIN=$1 go install -trimpath "$KUSTOMIZE_PKG@$2"; }
# The plugin library's tools: package and version from hack/versions.sh, which
# hack/images reads too, so bin/ and the plugin images hold the same build.
build_jsonnet() { GOBIN=$1 go install -trimpath -ldflags '-s -w' "$JSONNET_PKG@$2"; }
build_tk() {
  (cd "$ROOT/test/e2e/tools/tanka" && go build -trimpath -ldflags "-s -w -X github.com/grafana/tanka/pkg/tanka.CurrentVersion=$2" -o "$1/tk" github.com/grafana/tanka/cmd/tk)
}
build_ytt() {
  (cd "$ROOT/test/e2e/tools/ytt" && go build -trimpath -ldflags "-X carvel.dev/ytt/pkg/version.Version=$YTT_VERSION_NUMBER" -o "$1/ytt" carvel.dev/ytt/cmd/ytt)
}
# cdk8s: Node.js from Debian and cdk8s-cli from npm, the cmp-cdk8s image's tree
# (hack/images -rootfs), and bin/cdk8s to run it here. Debian's Node.js loads
# modules from fixed paths under /usr, so the tree's /usr is laid over this
# machine's in a private mount namespace (as root, or in a user namespace) and
# the image's own start script runs there with the image's PATH. The cache key
# is the locks and the code that lays the tree out.
cdk8s_key() {
  (cd "$ROOT" && cat deploy/plugins/cdk8s/debian.lock deploy/plugins/cdk8s/tools/package-lock.json \
    hack/images/rootfs.go hack/images/cdk8s.go | sha256sum | cut -c1-12)
}
build_cdk8s() {
  local final="$CACHE/cdk8s-$2-$BUILD_KEY/rootfs"
  (cd "$ROOT" && go run ./hack/images -rootfs cdk8s -out "$1/rootfs")
  cat >"$1/cdk8s" <<'SCRIPT'
#!/bin/sh
# bin/cdk8s: the cmp-cdk8s image's cdk8s on this machine (hack/tools.sh).
if [ "$(id -u)" = 0 ]; then ns=--mount; else ns="--mount --map-root-user"; fi
# shellcheck disable=SC2086
exec unshare $ns --propagation private /bin/sh -c 'mount -t overlay cdk8s -o "lowerdir=$0/usr:/usr" /usr && PATH=/usr/local/bin:/usr/bin:/bin exec /usr/local/bin/cdk8s "$@"' ROOTFS "$@"
SCRIPT
  sed -i "s|ROOTFS|$final|" "$1/cdk8s"
  chmod +x "$1/cdk8s"
}
build_argocd_vault_plugin() {
  (cd "$ROOT/test/e2e/tools/argocd-vault-plugin" && go build -trimpath -ldflags "-s -w -X github.com/argoproj-labs/argocd-vault-plugin/version.Version=$2" -o "$1/argocd-vault-plugin" github.com/argoproj-labs/argocd-vault-plugin)
}
build_sops() { GOBIN=$1 go install -trimpath -ldflags '-s -w' "$SOPS_PKG@$2"; }
# helmfile and Vault build from tools modules that carry their replace blocks.
build_helmfile() {
  (cd "$ROOT/test/e2e/tools/helmfile" && go build -trimpath -ldflags "-s -w -X go.szostok.io/version.version=$2" -o "$1/helmfile" github.com/helmfile/helmfile)
}
build_vault() {
  (cd "$ROOT/test/e2e/tools/vault" && go build -trimpath -ldflags '-s -w' -o "$1/vault" github.com/hashicorp/vault)
}
build_age_keygen() { GOBIN=$1 go install -trimpath -ldflags "-s -w -X main.Version=$2" "filippo.io/age/cmd/age-keygen@$2"; }

# etcd and kube-apiserver come from their own modules under test/e2e/tools so that
# the project's go.mod never requires them.
build_etcd() {
  (cd "$ROOT/test/e2e/tools/etcd" &&
    go build -trimpath -ldflags '-s -w' -o "$1/etcd" go.etcd.io/etcd/server/v3)
}
build_kube_apiserver() {
  reuse_k8s kube-apiserver "$1/kube-apiserver" "$2" ||
    build_k8s "$ROOT/test/e2e/tools/kube-apiserver" kube-apiserver "$1/kube-apiserver" "$2"
}
build_kube_apiserver_prev() { build_k8s "$ROOT/test/e2e/tools/kube-apiserver-1.32" kube-apiserver "$1/kube-apiserver-1.32" "$2"; }
build_kube_controller_manager() {
  reuse_k8s kube-controller-manager "$1/kube-controller-manager" "$2" ||
    build_k8s "$ROOT/test/e2e/tools/kube-apiserver" kube-controller-manager "$1/kube-controller-manager" "$2"
}
build_kubelet() { build_k8s "$ROOT/test/e2e/tools/kubelet" kubelet "$1/kubelet" "$2"; }
# reuse_k8s CMD OUT VERSION: the same release's CMD already built under the
# other naming (a pin's cache, or the matrix's kube@VERSION) is copied rather
# than built again; both come from the same sources.
reuse_k8s() {
  local minor src
  minor=$(echo "$3" | cut -d. -f1,2 | sed 's/^v//')
  for src in "$CACHE/$1-$3/$1" "$CACHE/kube-apiserver-$minor-$3/$1-$minor"; do
    if [ -x "$src" ]; then
      log "reusing $src"
      cp "$src" "$2"
      return
    fi
  done
  return 1
}
build_kube_controller_manager_prev() { build_k8s "$ROOT/test/e2e/tools/kube-apiserver-1.32" kube-controller-manager "$1/kube-controller-manager-1.32" "$2"; }
# build_k8s MODULE COMMAND OUT VERSION: a k8s.io/kubernetes command from a tools
# module, reporting VERSION as a release build would.
build_k8s() {
  local mod=$1 cmd=$2 out=$3 v=$4 minor
  minor=$(echo "$v" | cut -d. -f2)
  local ldf="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldf="$ldf -X $pkg.gitVersion=$v -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  done
  (cd "$mod" && go build -trimpath -ldflags "$ldf" -o "$out" "k8s.io/kubernetes/cmd/$cmd")
}

# Argo CD's multi-call binary and repoclient (our caller of its repo-server API)
# from test/e2e/tools/argocd (v3) and test/e2e/tools/argocd-v2. repoclient has one
# source: the v2 build reads it through a -overlay that rewrites the import path.
argocd_ldflags() {
  echo "-s -w -X github.com/argoproj/argo-cd/$1/common.version=${2#v} -X github.com/argoproj/argo-cd/$1/common.gitTreeState=clean"
}
# Argo CD's image also ships these scripts of its module's hack/ next to the
# binary; the repo-server runs git-verify-wrapper.sh for every generation (v3.6).
ARGOCD_IMAGE_SCRIPTS="git-verify-wrapper.sh gpg-wrapper.sh"
build_argocd() {
  (cd "$ROOT/test/e2e/tools/argocd" && GOTOOLCHAIN=$ARGOCD_GO go build -trimpath \
    -ldflags "$(argocd_ldflags v3 "$2")" -o "$1/argocd" github.com/argoproj/argo-cd/v3/cmd &&
    argocd_scripts "$1" github.com/argoproj/argo-cd/v3 "$ARGOCD_GO")
}
build_argocd_v2() {
  (cd "$ROOT/test/e2e/tools/argocd-v2" && go build -trimpath \
    -ldflags "$(argocd_ldflags v2 "$2")" -o "$1/argocd-v2" github.com/argoproj/argo-cd/v2/cmd &&
    argocd_scripts "$1" github.com/argoproj/argo-cd/v2 local)
}
argocd_scripts() {
  local src f
  src=$(GOTOOLCHAIN=$3 go list -m -f '{{.Dir}}' "$2")
  for f in $ARGOCD_IMAGE_SCRIPTS; do install -m 0755 "$src/hack/$f" "$1/$f"; done
}
build_repoclient() {
  (cd "$ROOT/test/e2e/tools/argocd" && GOTOOLCHAIN=$ARGOCD_GO go build -trimpath -o "$1/repoclient" ./repoclient)
}
build_repoclient_v2() {
  local mod="$ROOT/test/e2e/tools/argocd-v2" tmp
  tmp=$(mktemp -d)
  sed 's#github.com/argoproj/argo-cd/v3/#github.com/argoproj/argo-cd/v2/#' \
    "$ROOT/test/e2e/tools/argocd/repoclient/main.go" >"$tmp/main.go"
  printf '{"Replace":{"%s":"%s"}}\n' "$mod/repoclient/main.go" "$tmp/main.go" >"$tmp/overlay.json"
  (cd "$mod" && go build -trimpath -overlay "$tmp/overlay.json" -o "$1/repoclient-v2" ./repoclient)
  rm -rf "$tmp"
}
# repoclient's cache key includes its source's hash, so an edit rebuilds it.
repoclient_version() {
  echo "$1-$(sha256sum "$ROOT/test/e2e/tools/argocd/repoclient/main.go" | cut -c1-12)"
}
# cmpbench: the benchmark suite's driver, Argo CD's repo-server code calling plugins.
build_cmpbench() {
  (cd "$ROOT/test/e2e/tools/argocd" && GOTOOLCHAIN=$ARGOCD_GO go build -trimpath -o "$1/cmpbench" ./cmpbench)
}
cmpbench_version() {
  echo "$1-$(sha256sum "$ROOT/test/e2e/tools/argocd/cmpbench/main.go" | cut -c1-12)"
}

# Argo CD's own end-to-end test package (test/e2e of the pinned release, from
# the Go module proxy), compiled once with `go test -c`: make e2e-argo runs its
# plugin tests against Argo CD's plugin server and ours.
build_argo_e2e() {
  (cd "$ROOT/test/e2e/tools/argocd" && GOTOOLCHAIN=$ARGOCD_GO go test -c -vet=off -trimpath \
    -o "$1/argo-e2e.test" github.com/argoproj/argo-cd/v3/test/e2e)
}
# kubectl, which Argo CD's fixture runs, from the kube-apiserver tools module.
build_kubectl() { build_k8s "$ROOT/test/e2e/tools/kube-apiserver" kubectl "$1/kubectl" "$2"; }
# kwok, the Kubernetes SIG's node simulator: a Node whose pods are Ready
# without a kubelet, for the Deployments Argo CD syncs in the suite.
build_kwok() {
  (cd "$ROOT/test/e2e/tools/kwok" && go build -trimpath -ldflags '-s -w' -o "$1/kwok" sigs.k8s.io/kwok/cmd/kwok)
}
# goreman, the process manager Argo CD's fixture asks about its processes.
build_goreman() {
  (cd "$ROOT/test/e2e/tools/goreman" && go build -trimpath -ldflags '-s -w' -o "$1/goreman" github.com/mattn/goreman)
}

# argocd-operator's manager from test/e2e/tools/argocd-operator; the suite runs it
# against its apiserver and applies the CRDs from the same module's config/crd.
build_argocd_operator() {
  (cd "$ROOT/test/e2e/tools/argocd-operator" && go build -trimpath \
    -ldflags "-s -w -X github.com/argoproj-labs/argocd-operator/version.Version=${2#v}" \
    -o "$1/argocd-operator" github.com/argoproj-labs/argocd-operator/cmd)
}

# The version matrix (make e2e-matrix) builds any served release the same way
# as the pinned ones, from a tools module generated into the cache (never into
# the clone): its go.mod requires the release and carries the release's own
# replace block, with the monorepo's ./staging paths turned into the published
# modules of the same release (a dependency's replaces do not apply).
#
#   kube@vX.Y.Z    bin/kube-apiserver-X.Y and bin/kube-controller-manager-X.Y
#   argocd@vX.Y.Z  bin/argocd-X.Y and bin/repoclient-X.Y
#
# matrix_module DIR MODULE VERSION REPLACE-SED: write DIR/go.mod; prints the go
# toolchain the release needs (local, or $ARGOCD_GO when it asks for a newer Go).
matrix_module() {
  local dir=$1 mod=$2 v=$3 sedexpr=$4 gomod golines goline
  local dl
  dl=$(GOTOOLCHAIN=$ARGOCD_GO go mod download -json "$mod@$v" || true)
  gomod=$(echo "$dl" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  if [ ! -f "$gomod" ]; then
    # go's own reason, e.g. a version the checksum database does not know.
    log "cannot download $mod@$v: $(echo "$dl" | sed -n 's/.*"Error": "\(.*\)".*/\1/p')"
    return 1
  fi
  golines=$(grep -E '^(go|godebug) ' "$gomod")
  goline=$(echo "$golines" | sed -n 's/^go //p')
  mkdir -p "$dir"
  {
    echo "module cmp-injector-matrix/$(basename "$dir")"
    echo
    echo "$golines"
    echo
    echo "require $mod $v"
    echo
    echo "replace ("
    # The release's replace block, single-line and parenthesised forms alike.
    awk '/^replace \($/{inb=1; next} inb && /^\)/{inb=0; next} inb{print; next} /^replace [^(]/{sub(/^replace /,""); print}' "$gomod" |
      sed -E "$sedexpr" | grep -v '=> \./' || true
    echo ")"
  } >"$dir/go.mod"
  if [ "$(printf '%s\n%s\n' "$goline" "$(go env GOVERSION | sed 's/^go//')" | sort -V | tail -1)" = "$(go env GOVERSION | sed 's/^go//')" ]; then
    echo local
  else
    echo "$ARGOCD_GO"
  fi
}

# matrix_kube_fallbacks DIR VERSION: the Go module proxy does not serve every
# staging module at every patch (test/e2e/tools/kube-apiserver-1.32 says which
# for v1.32.13). A staging module the release's patch is missing for is taken at
# the newest served patch of the same minor (staging APIs do not change within a
# minor); one with no served patch at all gets a stub module, which is enough
# when neither binary imports it (the build says so otherwise). Served means
# downloadable and verified: the proxy lists some versions the checksum database
# does not know (k8s.io/legacy-cloud-providers v0.27.x), which `go list -m`
# accepts and the build then refuses.
served() { (cd / && GOFLAGS=-mod=mod go mod download "$1" >/dev/null 2>&1); }

matrix_kube_fallbacks() {
  local dir=$1 v=$2 staging name want alt p
  staging="v0.${v#v1.}"
  for name in $(sed -n "s#^\t\(k8s.io/[a-z0-9-]*\) => k8s.io/[a-z0-9-]* $staging\$#\1#p" "$dir/go.mod"); do
    served "$name@$staging" && continue
    want=$(echo "$staging" | cut -d. -f1,2)
    # The proxy's version lists are partial: probe the older patches.
    alt=""
    for p in $(seq $(($(echo "$staging" | cut -d. -f3) - 1)) -1 0); do
      if served "$name@$want.$p"; then alt="$want.$p"; break; fi
    done
    if [ -n "$alt" ]; then
      log "$name $staging is not served; taking $alt"
      sed -i "s#^\t$name => $name $staging\$#\t$name => $name $alt#" "$dir/go.mod"
    else
      log "$name has no served $want.x; stubbing it"
      mkdir -p "$dir/stubs/$name"
      printf 'module %s\n\ngo 1.21\n' "$name" >"$dir/stubs/$name/go.mod"
      sed -i "s#^\t$name => $name $staging\$#\t$name => ./stubs/$name#" "$dir/go.mod"
    fi
  done
}

build_matrix_kube() {
  local out=$1 v=$2 dir minor tc
  dir="$CACHE/.modules/kube-$v"
  minor=$(echo "$v" | cut -d. -f2)
  # A release that is (or was) a pin is already built: reuse it.
  if reuse_k8s kube-apiserver "$out/kube-apiserver-1.$minor" "$v" &&
    reuse_k8s kube-controller-manager "$out/kube-controller-manager-1.$minor" "$v"; then
    return
  fi
  tc=$(matrix_module "$dir" k8s.io/kubernetes "$v" "s#=> \./staging/src/(k8s.io/[a-z0-9-]+)\$#=> \1 v0.${v#v1.}#")
  GOTOOLCHAIN=$tc matrix_kube_fallbacks "$dir" "$v"
  GOTOOLCHAIN=$tc build_k8s "$dir" kube-apiserver "$out/kube-apiserver-1.$minor" "$v"
  GOTOOLCHAIN=$tc build_k8s "$dir" kube-controller-manager "$out/kube-controller-manager-1.$minor" "$v"
}

build_matrix_argocd() {
  local out=$1 v=$2 dir major short tc src f sedexpr
  major=$(echo "$v" | cut -d. -f1)
  short=$(echo "$v" | cut -d. -f1,2 | sed 's/^v//')
  dir="$CACHE/.modules/argocd-$v${BUILD_KEY:+-$BUILD_KEY}"
  # Argo CD's ./gitops-engine: from v3.6 the published gitops-engine/v3 module of
  # the same release; before that the replace is dropped and the pseudo-version
  # the release requires is taken from the proxy (a cell says so if it is not served).
  sedexpr="s#^(.*gitops-engine/v3) => \./gitops-engine\$#\1 => github.com/argoproj/argo-cd/gitops-engine/v3 $v#"
  if [ -n "${ARGOCD_SOURCE:-}" ]; then
    # Built from source (make e2e-matrix ARGOCD_SOURCE=DIR, never CI): v3.4 and
    # v3.5 require a gitops-engine pseudo-version the proxy refuses; the
    # release's own gitops-engine/ directory, exported from its tag in the git
    # repository DIR (e.g. the argo-cd snapshot the fetch tool gives), takes its
    # place, as Argo CD's own ./gitops-engine replace does in its tree.
    rm -rf "$dir/gitops-engine"
    mkdir -p "$dir"
    git --git-dir="$ARGOCD_SOURCE" archive "$v" gitops-engine | tar -x -C "$dir"
    sedexpr="s#=> \./gitops-engine\$#=> $dir/gitops-engine#"
  fi
  tc=$(matrix_module "$dir" "github.com/argoproj/argo-cd/$major" "$v" "$sedexpr")
  mkdir -p "$dir/repoclient"
  sed "s#github.com/argoproj/argo-cd/v3/#github.com/argoproj/argo-cd/$major/#" \
    "$ROOT/test/e2e/tools/argocd/repoclient/main.go" >"$dir/repoclient/main.go"
  (cd "$dir" && GOTOOLCHAIN=$tc go build -trimpath -ldflags "$(argocd_ldflags "$major" "$v")" \
    -o "$out/argocd-$short" "github.com/argoproj/argo-cd/$major/cmd" &&
    GOTOOLCHAIN=$tc go build -trimpath -o "$out/repoclient-$short" ./repoclient)
  src=$(cd "$dir" && GOTOOLCHAIN=$tc go list -m -f '{{.Dir}}' "github.com/argoproj/argo-cd/$major")
  # The scripts the image ships next to the binary, where the release has them.
  for f in $ARGOCD_IMAGE_SCRIPTS; do
    if [ -f "$src/hack/$f" ]; then install -m 0755 "$src/hack/$f" "$out/$f"; else : >"$out/$f"; chmod 0755 "$out/$f"; fi
  done
}

# apt_install CMD PACKAGE [FILE]: Debian packages for what the Go module proxy
# does not serve.
apt_install() {
  if ! system_command "$1" >/dev/null || { [ -n "${3:-}" ] && [ ! -f "$3" ]; }; then
    apt_get "$2"
  fi
  ln -sfn "$(system_command "$1")" "$BIN/$1"
}

# system_command NAME: where NAME is on PATH outside bin/. With bin/ first on
# PATH (as the suite runs), `command -v` finds our own link, and linking it
# again made it point at itself.
system_command() {
  (PATH=$(printf '%s' "$PATH" | tr ':' '\n' | grep -vxF -e "$BIN" -e "$BIN/" | paste -sd:) && command -v "$1")
}

# apt_install_only PACKAGE FILE: a Debian package whose files are used where they
# are (no bin/ link).
apt_install_only() {
  [ -e "$2" ] || apt_get "$1"
}

# apt_get PACKAGE installs it, waiting for the dpkg lock rather than failing
# when two tool installs overlap.
apt_get() {
  log "installing Debian $1"
  local sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get -o DPkg::Lock::Timeout=600 update -qq &&
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq "$1" >/dev/null
}

one() {
  case $1 in
  helm) BUILD_KEY="kube$HELM_KUBE_MAJOR.$HELM_KUBE_MINOR" cached helm "$HELM_VERSION" build_helm ;;
  protoc) apt_install protoc protobuf-compiler /usr/include/google/protobuf/empty.proto ;;
  redis-server) apt_install redis-server redis-server ;;
  # The playground's browser test drives it headless (make browser).
  chromium) apt_install chromium chromium ;;
  protoc-gen-go) cached protoc-gen-go "$PROTOC_GEN_GO_VERSION" build_protoc_gen_go ;;
  protoc-gen-go-grpc) cached protoc-gen-go-grpc "$PROTOC_GEN_GO_GRPC_VERSION" build_protoc_gen_go_grpc ;;
  etcd) cached etcd "$ETCD_VERSION" build_etcd ;;
  kube-apiserver) cached kube-apiserver "$KUBE_VERSION" build_kube_apiserver ;;
  kube-apiserver-1.32) cached kube-apiserver-1.32 "$KUBE_PREV_VERSION" build_kube_apiserver_prev ;;
  kube-controller-manager) cached kube-controller-manager "$KUBE_VERSION" build_kube_controller_manager ;;
  kube-controller-manager-1.32) cached kube-controller-manager-1.32 "$KUBE_PREV_VERSION" build_kube_controller_manager_prev ;;
  kubelet) cached kubelet "$KUBELET_VERSION" build_kubelet ;;
  # The real node of the end-to-end suite: Debian's containerd 1.6 and runc, the
  # CNI reference plugins, iptables (the kubelet and the bridge plugin call it),
  # busybox-static (the shell of test images) and util-linux's unshare/nsenter.
  containerd) apt_install containerd containerd ;;
  runc) apt_install runc runc ;;
  cni-plugins) apt_install_only containernetworking-plugins /usr/lib/cni/bridge ;;
  iptables) apt_install iptables iptables ;;
  busybox) apt_install_only busybox-static /bin/busybox ;;
  # shellcheck disable=SC2086
  argocd) cached argocd "$ARGOCD_VERSION" build_argocd $ARGOCD_IMAGE_SCRIPTS ;;
  # shellcheck disable=SC2086
  argocd-v2) cached argocd-v2 "$ARGOCD_V2_VERSION" build_argocd_v2 $ARGOCD_IMAGE_SCRIPTS ;;
  repoclient) cached repoclient "$(repoclient_version "$ARGOCD_VERSION")" build_repoclient ;;
  repoclient-v2) cached repoclient-v2 "$(repoclient_version "$ARGOCD_V2_VERSION")" build_repoclient_v2 ;;
  argocd-operator) cached argocd-operator "$ARGOCD_OPERATOR_VERSION" build_argocd_operator ;;
  argo-e2e.test) cached argo-e2e.test "$ARGOCD_VERSION" build_argo_e2e ;;
  kubectl) cached kubectl "$KUBE_VERSION" build_kubectl ;;
  goreman) cached goreman "$GOREMAN_VERSION" build_goreman ;;
  kwok) cached kwok "$KWOK_VERSION" build_kwok ;;
  # Argo CD's fixture's git server: nginx in front of git-http-backend
  # (fcgiwrap) over HTTPS, and sshd; gpg imports its signing key.
  nginx) apt_install nginx nginx-light ;;
  fcgiwrap) apt_install fcgiwrap fcgiwrap ;;
  sshd) apt_install sshd openssh-server ;;
  gpg) apt_install gpg gpg ;;
  cmpbench) cached cmpbench "$(cmpbench_version "$ARGOCD_VERSION")" build_cmpbench ;;
  benchstat) cached benchstat "$BENCHSTAT_VERSION" build_benchstat ;;
  kustomize) cached kustomize "$KUSTOMIZE_VERSION" build_kustomize ;;
  jsonnet) cached jsonnet "$JSONNET_VERSION" build_jsonnet ;;
  argocd-vault-plugin) cached argocd-vault-plugin "$AVP_VERSION" build_argocd_vault_plugin ;;
  ytt) cached ytt "$YTT_VERSION" build_ytt ;;
  cdk8s) BUILD_KEY=$(cdk8s_key) cached cdk8s "$CDK8S_CLI_VERSION" build_cdk8s rootfs ;;
  tk) cached tk "$TANKA_VERSION" build_tk ;;
  sops) cached sops "$SOPS_VERSION" build_sops ;;
  helmfile) cached helmfile "$HELMFILE_VERSION" build_helmfile ;;
  vault) cached vault "$VAULT_VERSION" build_vault ;;
  age-keygen) cached age-keygen "$AGE_VERSION" build_age_keygen ;;
  actionlint) cached actionlint "$ACTIONLINT_VERSION" build_actionlint ;;
  golangci-lint) cached golangci-lint "$GOLANGCI_LINT_VERSION" build_golangci_lint ;;
  promtool) cached promtool "$PROMETHEUS_VERSION" build_promtool ;;
  kube@v*)
    m=$(echo "${1#kube@}" | cut -d. -f1,2 | sed 's/^v//')
    cached "kube-apiserver-$m" "${1#kube@}" build_matrix_kube "kube-controller-manager-$m"
    link "kube-controller-manager-$m" "$CACHE/kube-apiserver-$m-${1#kube@}" ;;
  argocd@v*)
    m=$(echo "${1#argocd@}" | cut -d. -f1,2 | sed 's/^v//')
    # A build from source is cached apart from one from the proxy.
    if [ -n "${ARGOCD_SOURCE:-}" ]; then export BUILD_KEY=src; fi
    # shellcheck disable=SC2086
    cached "argocd-$m" "${1#argocd@}" build_matrix_argocd "repoclient-$m" $ARGOCD_IMAGE_SCRIPTS
    link "repoclient-$m" "$CACHE/argocd-$m-${1#argocd@}${BUILD_KEY:+-$BUILD_KEY}" ;;
  *) log "unknown tool $1"; exit 2 ;;
  esac
}

if [ $# = 0 ]; then
  set -- helm kustomize jsonnet sops helmfile argocd-vault-plugin ytt tk cdk8s age-keygen actionlint golangci-lint promtool protoc protoc-gen-go protoc-gen-go-grpc etcd \
    kube-apiserver kube-controller-manager kube-apiserver-1.32 kube-controller-manager-1.32 \
    argocd repoclient argocd-v2 repoclient-v2 redis-server chromium
fi
for t in "$@"; do one "$t"; done
