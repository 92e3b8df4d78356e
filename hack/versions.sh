# Versions pinned in more than one script; sourced by hack/tools.sh and
# hack/argocd-install.sh.

# Argo CD releases whose repo-server the end-to-end suite renders through: the
# newest v3 (CheckPluginConfiguration first) and the newest v2.12 the proxy serves
# (the MatchRepository-first generation). v3.6 needs the go1.27 toolchain, which
# the Go module proxy serves as golang.org/toolchain. deploy/overlays/argocd
# vendors the v3 release's install manifest.
ARGOCD_VERSION=v3.6.1
ARGOCD_GO=go1.27.4
ARGOCD_V2_VERSION=v2.12.13

# argocd-operator, whose manager reconciles an ArgoCD resource into the
# repo-server Deployment in the end-to-end suite: the newest release the Go module
# proxy served on 2026-11-26 (its version list answers 403; v0.15.0, v0.16.0,
# v0.17.0 and v0.18.0 were served, v0.15.1, v0.16.1, v0.17.1, v0.18.1, v0.19.0 not).
ARGOCD_OPERATOR_VERSION=v0.18.0

# actionlint checks .github/workflows in make lint.
ACTIONLINT_VERSION=v1.7.12

# promtool tests the chart's alerting rules (make test).
# v0.316.0 needs a github.com/hashicorp/nomad/api version the Go module proxy refuses (403).
PROMETHEUS_VERSION=v0.315.0

# golangci-lint runs staticcheck, unused, errorlint, gocritic and misspell in
# make lint (.golangci.yml). Built from the Go module proxy like every tool.
GOLANGCI_LINT_VERSION=v2.15.0

# make e2e-matrix (test/e2e/cmd/matrix): the newest patch the Go module proxy
# served on 2026-11-26 of every Kubernetes minor from the oldest README promised
# (1.27) to the newest served, and of every Argo CD minor from v2.10 to v3.6,
# whose go.mod the checksum database verifies: v2.10.13-v2.10.18 and
# v2.11.8-v2.11.14 are served but unknown to sum.golang.org (404), so go refuses
# them; v2.10.12 and v2.11.7 are the newest that verify. (v1.34 stays at the
# earlier pin, v1.34.4, whose build the cache has.) Where a minor's newest patch
# cannot be built from the proxy, the newest that can follows it: v3.3.10 after
# v3.3.19 (from v3.3.14 Argo's util/kube calls a ./gitops-engine method no
# published module has) and v3.2.11 after
# v3.2.12 (whose tree does not compile); see test/e2e/README.md.
# A cell may carry API server feature gates after a "+": v1.28 with its
# SidecarContainers gate on is a cluster that accepts native sidecars before
# v1.29, which the injector finds by asking, not by the version.
MATRIX_KUBE="v1.37.2 v1.36.5 v1.35.8 v1.34.4 v1.33.13 v1.32.13 v1.31.14 v1.30.14 v1.29.15 v1.28.15+SidecarContainers=true v1.28.15 v1.27.16"
MATRIX_ARGOCD="v3.6.1 v3.5.7 v3.4.13 v3.3.19 v3.3.10 v3.2.12 v3.2.11 v3.1.16 v3.0.23 v2.14.21 v2.13.9 v2.12.13 v2.11.7 v2.10.12"
# Argo CD releases the proxy cannot build (each v3.4 and v3.5 patch requires an
# in-repository gitops-engine pseudo-version it refuses), built from their tags
# with their own ./gitops-engine when the matrix is given the argo-cd git
# repository (-argocd-source DIR: the fetch tool's snapshot, whose newest tags
# of the two lines are these). Never CI.
MATRIX_ARGOCD_SOURCE="v3.5.1 v3.4.7"

# The plugin library (deploy/plugins/<name>/): each tool is built from the Go
# module proxy at its pin, for bin/ by hack/tools.sh and into its plugin image by
# hack/images (which reads the package and version from here, so both agree).
JSONNET_PKG=github.com/google/go-jsonnet/cmd/jsonnet
JSONNET_VERSION=v0.22.0
# Tanka's tk (deploy/plugins/tanka), built in its tools module (test/e2e/tools/tanka)
# with its Makefile's release flags (-s -w, tanka.CurrentVersion); v0.31.1 is the
# newest the Go module proxy serves (v0.31.2, v0.31.3 refused, v0.32.0 unverifiable).
TANKA_VERSION=v0.31.1
# ytt (deploy/plugins/ytt), built in its tools module (test/e2e/tools/ytt) with
# its release build's -X of the version without the v (its .goreleaser.yml), which
# YTT_VERSION_NUMBER spells out (hack/images' TestVersionNumbersMatch keeps the two equal).
YTT_VERSION=v0.52.0
YTT_VERSION_NUMBER=0.52.0
# argocd-vault-plugin (deploy/plugins/argocd-vault-plugin), built in its tools module
# (test/e2e/tools/argocd-vault-plugin) with version.Version set by -X as its release
# build does.
AVP_VERSION=v1.18.1
SOPS_PKG=github.com/getsops/sops/v3/cmd/sops
SOPS_VERSION=v3.13.3
# age-keygen makes the sops plugin's test key at test time (never shipped).
AGE_VERSION=v1.3.1
# helm (the helm plugin, kustomize-helm's chart inflation, and every test that
# renders a chart) and kustomize (the kustomize plugins, Argo CD's native
# Kustomize in the tests).
HELM_PKG=helm.sh/helm/v3/cmd/helm
HELM_VERSION=v3.22.0
# The Kubernetes version helm assumes without a cluster (helm template with no
# --kube-version, kustomize's helm inflator): helm's release build sets it with
# -X from the k8s.io/client-go its go.mod requires (v0.37.0 → 1.37); without it
# helm assumes v1.20 and refuses charts with a newer kubeVersion constraint.
# TestHelmKubeVersionPin checks it against the pinned helm's go.mod.
HELM_KUBE_MAJOR=1
HELM_KUBE_MINOR=37
KUSTOMIZE_PKG=sigs.k8s.io/kustomize/kustomize/v5
KUSTOMIZE_VERSION=v5.8.2
# helmfile (the helmfile plugin; vals, which resolves its ref+vault:// values, is
# a library inside it) and the Vault server its tests authenticate against. Both
# need a tools module (test/e2e/tools/<name>) for their go.mod's replace blocks;
# the module's go.mod must require the same versions (TestToolModulesMatchPins).
# Vault is BUSL-1.1: built for the tests only, never shipped.
HELMFILE_VERSION=v1.8.0
VAULT_VERSION=v1.19.5
# cdk8s (deploy/plugins/cdk8s): cdk8s-cli from npm at this version, with the
# libraries an app requires, pinned with their integrity by
# deploy/plugins/cdk8s/tools/package-lock.json, on Node.js from Debian bookworm
# (deploy/plugins/cdk8s/debian.lock, written by hack/debian-lock.sh).
# hack/images' TestCdk8sPins keeps this equal to tools/package.json.
CDK8S_CLI_VERSION=2.207.60
