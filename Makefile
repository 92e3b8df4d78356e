# cmp-injector: build, test and run everything from a fresh clone.
# `make demo` shows the product working; `make test` is what CI runs.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
export GOTOOLCHAIN := local
export CGO_ENABLED := 0

BIN := $(CURDIR)/bin
GO_PACKAGES := ./...
FUZZTIME ?= 20s
BENCHTIME ?= 1s
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/cmp-injector/cmp-injector/pkg/version.Version=$(VERSION)
CHART := charts/cmp-injector

.PHONY: all build tools test test-no-node unit unit-long browser e2e e2e-vault e2e-matrix e2e-node e2e-argo lint proto proto-check chart bench bench-e2e bench-node fuzz demo clean static-check images

all: build

## build: static binaries for both commands into bin/
build:
	mkdir -p $(BIN)
	go build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/cmp-injector ./cmd/cmp-injector
	go build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/cmp-server ./cmd/cmp-server

## static-check: the images hold these binaries on an empty base, so they must not need a loader
static-check: build
	@for b in cmp-injector cmp-server; do \
	  if readelf -l $(BIN)/$$b | grep -q 'Requesting program interpreter'; then \
	    echo "$$b is dynamically linked"; exit 1; fi; \
	  echo "$$b: static"; done

## images: OCI images of both binaries and the plugin library (linux/amd64, linux/arm64) into bin/images,
## with no container engine and no base image download; reproducible per commit
images:
	go run ./hack/images --out $(BIN)/images --version $(VERSION)

## tools: pinned helm, kustomize, protoc plugins, etcd, kube-apiserver and
## kube-controller-manager, Argo CD and Redis into bin/ (cached outside the clone)
tools:
	hack/tools.sh

## proto: regenerate the gRPC code from cmpserver's .proto files
proto:
	hack/tools.sh protoc protoc-gen-go protoc-gen-go-grpc
	hack/proto.sh

## proto-check: fail when the committed generated code is stale
proto-check: proto
	@git diff --exit-code -- '*.pb.go' || { echo "generated code is stale: run make proto and commit"; exit 1; }

## lint: gofmt, golangci-lint (govet, staticcheck, unused, errorlint, gocritic's
## diagnostics, misspell: .golangci.yml), helm lint --strict, actionlint
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go') ); if [ -n "$$out" ]; then echo "gofmt wants to change:"; echo "$$out"; exit 1; fi
	hack/tools.sh golangci-lint helm actionlint
	$(BIN)/golangci-lint run $(GO_PACKAGES)
	$(BIN)/helm lint --strict $(CHART)
	$(BIN)/actionlint -no-color .github/workflows/*.yml

## chart: sync the example catalog into the chart, render deploy/base, lint and package into bin/
chart:
	hack/tools.sh helm
	cp deploy/plugins/catalog.yaml $(CHART)/files/example-catalog.yaml
	hack/render-deploy.sh
	$(BIN)/helm lint --strict $(CHART)
	$(BIN)/helm package $(CHART) -d $(BIN)

## unit: every Go test except the end-to-end suite, without the long ones (-short)
unit:
	PATH="$(BIN):$$PATH" go test -short -count=1 $$(go list $(GO_PACKAGES) | grep -v /test/e2e)

## unit-long: the tests -short skips (cmp-server's 90 s keepalive pair, the
## image builds: every image for two architectures, and one of each kind again to prove
## the builds reproducible, about 7 min warm and 30 cold, hence the timeout)
unit-long:
	PATH="$(BIN):$$PATH" go test -count=1 -timeout 60m -run 'Keepalive|GRPCPolicy|TestImages' ./cmpserver/ ./hack/images/

## browser: the playground page (cmpserver/playground) in a real headless chromium,
## Debian's, driven by chromedp; screenshots are kept in bin/test-artifacts
browser:
	hack/tools.sh chromium helm
	mkdir -p $(BIN)/test-artifacts
	PATH="$(BIN):$$PATH" go test -count=1 -timeout 10m -tags browser -run '^TestBrowser' -v \
	  -artifacts -outputdir $(BIN)/test-artifacts ./cmpserver/playground/

## e2e: real etcd + kube-apiserver + kube-controller-manager, helm, the injector,
## plugin servers and Argo CD's repo-server (v3 and v2) on loopback, on every pinned
## Kubernetes version (E2E_APISERVERS lists their bin/ names), and a Vault dev server
## (BUSL-1.1, built for the tests only, never shipped) as the helmfile plugin's secret
## store: E2E_VAULT=1 turns its tests on
E2E_APISERVERS ?= kube-apiserver kube-apiserver-1.32
E2E_TOOLS := etcd helm kustomize jsonnet sops helmfile argocd-vault-plugin ytt tk cdk8s age-keygen redis-server argocd repoclient cmpbench argocd-v2 repoclient-v2 argocd-operator kwok \
	$(E2E_APISERVERS) $(E2E_APISERVERS:kube-apiserver%=kube-controller-manager%)
e2e:
	hack/tools.sh $(E2E_TOOLS) vault
	E2E_VAULT=1 PATH="$(BIN):$$PATH" go test -count=1 -timeout 10m -v -run '^(TestHelmfile|TestArgoCDVaultPlugin)$$' ./deploy/plugins/
	@for kas in $(E2E_APISERVERS); do \
	  echo "== end-to-end suite on $$kas"; \
	  E2E_VAULT=1 E2E_KUBE_APISERVER=$$kas PATH="$(BIN):$$PATH" go test -count=1 -timeout 30m -v -skip TestRealNode ./test/e2e/... || exit 1; \
	done

## e2e-vault: only the Vault tests of make e2e: the helmfile and argocd-vault-plugin plugins against a real
## Vault dev server, its ref+vault:// values through vals, Vault's Kubernetes auth with
## the sidecar's projected token reviewed by the suite's kube-apiserver, two tenants
## with their own roles.
e2e-vault:
	hack/tools.sh $(E2E_TOOLS) vault
	E2E_VAULT=1 PATH="$(BIN):$$PATH" go test -count=1 -timeout 10m -v -run '^(TestHelmfile|TestArgoCDVaultPlugin)$$' ./deploy/plugins/
	E2E_VAULT=1 E2E_KUBE_APISERVER=kube-apiserver PATH="$(BIN):$$PATH" go test -count=1 -timeout 20m -v -run '^(TestHelmfileVault|TestArgoCDVaultPluginThroughArgoCD)$$' ./test/e2e/

## e2e-matrix: the end-to-end suite on every Kubernetes minor and the chain on every
## Argo CD minor (hack/versions.sh MATRIX_KUBE, MATRIX_ARGOCD), each built from the Go
## module proxy; writes docs/compatibility.{json,md} and README's Compatibility block.
## Hours cold (a release's build is 10-25 min on 2 cores): MATRIX_ARGS=-resume continues
## an interrupted run. Not part of make test; a scheduled workflow runs it.
e2e-matrix:
	hack/tools.sh etcd helm kustomize redis-server
	go run ./test/e2e/cmd/matrix $(MATRIX_ARGS)

## e2e-node: the real node: the injected repo-server pod run by a real kubelet,
## containerd and runc from locally built images, in namespaces of its own (root)
NODE_TOOLS := kubelet containerd runc cni-plugins iptables busybox
e2e-node:
	@if [ "$$(id -u)" != 0 ]; then \
	  echo "e2e-node needs root: it runs containerd, runc and a kubelet in network and mount namespaces it creates,"; \
	  echo "and cgroups. Run it as root (CI does), or run 'make test-no-node' for everything else."; exit 1; fi
	hack/tools.sh $(E2E_TOOLS) $(NODE_TOOLS) vault
	E2E_VAULT=1 E2E_KUBE_APISERVER=kube-apiserver PATH="$(BIN):$$PATH" go test -count=1 -timeout 20m -v -run TestRealNode ./test/e2e/

## e2e-argo: Argo CD's own end-to-end tests of plugins (every test of its pinned
## release's test/e2e package that starts a plugin server), unmodified, once with
## Argo CD's plugin server and once with ours, around the whole Argo CD under
## goreman and the fixture's git server (nginx, fcgiwrap, sshd from Debian); writes
## docs/argo-e2e.json and the last section of docs/compatibility.md, and fails when
## a test passes with Argo CD's server and not with ours (root: sshd logs the
## fixture's ssh:// URLs in as root)
ARGO_E2E_TOOLS := argo-e2e.test kubectl goreman nginx fcgiwrap sshd gpg argocd etcd kube-apiserver kube-controller-manager \
	helm kustomize redis-server
e2e-argo:
	@if [ "$$(id -u)" != 0 ]; then \
	  echo "e2e-argo needs root: Argo CD's fixture clones over ssh://root@localhost:2222 from an sshd it logs in as root."; exit 1; fi
	hack/tools.sh $(ARGO_E2E_TOOLS)
	PATH="$(BIN):$$PATH" go run ./test/e2e/cmd/argoe2e $(ARGO_E2E_ARGS)

## test: what CI runs
test: test-no-node e2e-node e2e-argo

## test-no-node: everything `make test` runs except what needs root (the real node, Argo CD's own plugin tests)
## (the README's first command, make demo, runs first: on a fresh clone it proves
## the demo installs all it needs itself)
test-no-node: demo tools lint proto-check static-check unit unit-long browser e2e

## bench: Go benchmarks of the handler and the stream receiver
bench:
	PATH="$(BIN):$$PATH" go test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./injector/... ./cmpserver/...

## bench-e2e: the performance suite: our plugin server and Argo CD's argocd-cmp-server
## driven by Argo CD's repo-server code (stock and tuned repo-server), and the
## webhook against a no-op TLS floor, side by side with ratios (BENCH_ARGS to add
## flags, e.g. BENCH_ARGS='--repeat 3'), then the pass lines (PASS/MISS against the
## goals, as ratios of the same run's figures); then the monorepo's hard refresh
## through the whole Argo CD, its application controller driving its repo-server
## around Argo CD's hand-written sidecar and ours (TestRefreshBench:
## BENCH_REFRESH_SIZE=quick|100|500, empty to skip; BENCH_REFRESH_ROUNDS); nothing
## asserts a time
BENCH_ARGS ?=
BENCH_REFRESH_SIZE ?= quick
BENCH_REFRESH_ROUNDS ?= 3
bench-e2e: build
	hack/tools.sh argocd cmpbench etcd kube-apiserver kube-controller-manager redis-server helm
	PATH="$(BIN):$$PATH" go run ./test/e2e/cmd/bench $(BENCH_ARGS)
	@if [ -n "$(BENCH_REFRESH_SIZE)" ]; then \
	  E2E_REFRESH_BENCH=1 E2E_REFRESH_BENCH_SIZE=$(BENCH_REFRESH_SIZE) E2E_REFRESH_BENCH_ROUNDS=$(BENCH_REFRESH_ROUNDS) \
	  E2E_KUBE_APISERVER=kube-apiserver PATH="$(BIN):$$PATH" go test -count=1 -timeout 300m -v -run '^TestRefreshBench$$' ./test/e2e/; fi

## bench-node: the real node's figures (root; see e2e-node): pod creation → each
## container started → repo-server started → Ready for 0, 1 and 4 plugins injected (and 4 library plugins, no copy),
## the same without the start gate, 4 gated plugins as regular containers, and as
## Argo CD's hand-written sidecars, with the kubelet's relists; GenerateManifest with
## the plugin's /tmp on disk and in memory (whole request and the server's own part);
## each container's memory from its cgroup idle, after requests and once idle again;
## printed side by side (E2E_NODE_BENCH_PODS=10 for more pods); nothing asserts a time
bench-node:
	@if [ "$$(id -u)" != 0 ]; then echo "bench-node needs root, as e2e-node does"; exit 1; fi
	hack/tools.sh $(E2E_TOOLS) $(NODE_TOOLS)
	E2E_NODE_BENCH=1 E2E_KUBE_APISERVER=kube-apiserver PATH="$(BIN):$$PATH" go test -count=1 -timeout 60m -v -run '^TestNodeBench$$' ./test/e2e/

## fuzz: run every fuzz target for FUZZTIME each
fuzz:
	@for pkg in $$(go list $(GO_PACKAGES)); do \
	  for f in $$(go test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$f"; go test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; done; done

## demo: the whole chain, for real, on this machine: helm install, the README's
## commands, the injected pod, Argo CD's repo-server rendering through a sidecar
demo:
	hack/tools.sh etcd kube-apiserver kube-controller-manager helm kustomize redis-server argocd repoclient
	PATH="$(BIN):$$PATH" go run ./test/e2e/cmd/demo

clean:
	rm -rf $(BIN)/cmp-injector $(BIN)/cmp-server $(BIN)/*.tgz
