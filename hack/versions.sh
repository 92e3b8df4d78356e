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

# actionlint checks .github/workflows in make lint.
ACTIONLINT_VERSION=v1.7.12

# promtool tests the chart's alerting rules (make test).
# v0.316.0 needs a github.com/hashicorp/nomad/api version the Go module proxy refuses (403).
PROMETHEUS_VERSION=v0.315.0

# golangci-lint runs staticcheck, unused, errorlint, gocritic and misspell in
# make lint (.golangci.yml). Built from the Go module proxy like every tool.
GOLANGCI_LINT_VERSION=v2.15.0
