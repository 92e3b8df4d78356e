{{/* Chart name, truncated to the DNS label limit. */}}
{{- define "cmp-injector.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified name used as the prefix of every object. */}}
{{- define "cmp-injector.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if contains (include "cmp-injector.name" .) .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name (include "cmp-injector.name" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "cmp-injector.selectorLabels" -}}
app.kubernetes.io/name: {{ include "cmp-injector.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "cmp-injector.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "cmp-injector.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "cmp-injector.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "cmp-injector.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Name of the TLS Secret holding the serving certificate. */}}
{{- define "cmp-injector.tlsSecretName" -}}
{{- default (printf "%s-tls" (include "cmp-injector.fullname" .)) .Values.certificates.secretName }}
{{- end }}

{{/*
The Kubernetes version the chart renders for: kubeVersion if set, else the
cluster's. helm template without --kube-version reports v1.20.0, which this
chart does not support (1.27+); that can only be an offline render, which then
targets minimumAssumedVersion, native sidecars and matchConditions included.
NOTES.txt says which it was.
*/}}
{{- define "cmp-injector.kubeVersion" -}}
{{- if .Values.kubeVersion }}
{{- .Values.kubeVersion }}
{{- else if semverCompare "<1.27.0-0" .Capabilities.KubeVersion.Version }}
{{- "v1.33.0" }}
{{- else }}
{{- .Capabilities.KubeVersion.Version }}
{{- end }}
{{- end }}

{{/* catalog.nativeSidecars as "true", "false" or "auto". "auto" is not resolved
here from the cluster version: the version does not say it (1.28 has native sidecars
with the SidecarContainers feature gate on, 1.29-1.32 not with it off). The catalog
says auto and the injector asks its API server at start-up, by a dry run. */}}
{{- define "cmp-injector.nativeSidecars" -}}
{{- toString .Values.catalog.nativeSidecars }}
{{- end }}

{{/* The plugin catalog document rendered into the ConfigMap. */}}
{{- define "cmp-injector.catalog" -}}
{{- $plugins := dict }}
{{- if .Values.catalog.examples }}
{{- $examples := fromYaml (.Files.Get "files/example-catalog.yaml") }}
{{- $plugins = deepCopy (default dict $examples.plugins) }}
{{- end }}
{{- range $name, $plugin := .Values.catalog.plugins }}
{{- $_ := set $plugins $name $plugin }}
{{- end }}
{{- /* The injector refuses a catalog whose namespaces name a plugin it does not
define, and would never become ready; say it here, in the injector's words. */}}
{{- $known := keys $plugins | sortAlpha }}
{{- $namespaces := include "cmp-injector.namespaces" . | fromYaml }}
{{- range $ns := keys $namespaces | sortAlpha }}
{{- $seen := dict }}
{{- range $i, $name := index $namespaces $ns }}
{{- if not (hasKey $plugins $name) }}
{{- fail (printf "catalog: namespaces.%s[%d]: unknown plugin %q (known: %s)" $ns $i $name (join ", " $known)) }}
{{- end }}
{{- if hasKey $seen $name }}
{{- fail (printf "catalog: namespaces.%s[%d]: duplicate plugin %q" $ns $i $name) }}
{{- end }}
{{- $_ := set $seen $name true }}
{{- end }}
{{- end }}
{{- $copyTag := default .Chart.AppVersion .Values.catalog.copyImage.tag }}
{{- $catalog := dict
  "apiVersion" "cmp-injector.io/v1alpha1"
  "kind" "PluginCatalog"
  "defaults" (dict
    "nativeSidecars" (ternary "auto" (eq (include "cmp-injector.nativeSidecars" .) "true") (eq (include "cmp-injector.nativeSidecars" .) "auto"))
    "copyImage" (printf "%s:%s" .Values.catalog.copyImage.repository $copyTag)
    "copyImagePullPolicy" .Values.catalog.copyImage.pullPolicy
    "runAsUser" .Values.catalog.runAsUser
    "resources" .Values.catalog.resources)
  "plugins" $plugins
  "namespaces" $namespaces }}
{{- if .Values.catalog.revision }}
{{- $_ := set $catalog "revision" .Values.catalog.revision }}
{{- end }}
{{- if .Values.catalog.repoServer }}
{{- $_ := set $catalog.defaults "repoServer" .Values.catalog.repoServer }}
{{- end }}
{{- if eq .Values.catalog.runAsUserPolicy "Assigned" }}
{{- /* The catalog refuses a fixed UID with the Assigned policy. */}}
{{- $_ := unset $catalog.defaults "runAsUser" }}
{{- $_ := set $catalog.defaults "runAsUserPolicy" "Assigned" }}
{{- end }}
{{- if .Values.catalog.tmpSizeLimit }}
{{- $_ := set $catalog.defaults "tmpSizeLimit" .Values.catalog.tmpSizeLimit }}
{{- end }}
{{- if .Values.catalog.tmpMedium }}
{{- $_ := set $catalog.defaults "tmpMedium" .Values.catalog.tmpMedium }}
{{- end }}
{{- if .Values.catalog.repoServerContainer }}
{{- $_ := set $catalog.defaults "repoServerContainer" .Values.catalog.repoServerContainer }}
{{- end }}
{{- toYaml $catalog }}
{{- end }}

{{/*
The webhook's namespaceSelector as a label selector string, for the reconciler:
it must look after exactly the namespaces the webhook injects in (two releases
may split the cluster with namespaceSelectorExtraExpressions).
*/}}
{{- define "cmp-injector.namespaceSelector" -}}
{{- $parts := list "cmp-injector.io/enabled=true" -}}
{{- range .Values.webhook.namespaceSelectorExtraExpressions -}}
{{- if eq .operator "In" -}}
{{- $parts = append $parts (printf "%s in (%s)" .key (join "," .values)) -}}
{{- else if eq .operator "NotIn" -}}
{{- $parts = append $parts (printf "%s notin (%s)" .key (join "," .values)) -}}
{{- else if eq .operator "Exists" -}}
{{- $parts = append $parts .key -}}
{{- else if eq .operator "DoesNotExist" -}}
{{- $parts = append $parts (printf "!%s" .key) -}}
{{- else -}}
{{- fail (printf "webhook.namespaceSelectorExtraExpressions: unknown operator %q" .operator) -}}
{{- end -}}
{{- end -}}
{{- join "," $parts -}}
{{- end }}

{{/*
A CEL test, over `object`, that is true for every pod the injector recognises
as a repo-server (pkg/inject's repoServerIndex): a container named one of
catalog.repoServerContainer.names, or one whose command or args hold a word
(or a word of a shell script) whose base name is one of its programs. It may
also be true for a few pods the injector then skips; it is never false for a
repo-server. The defaults are pkg/catalog's (defaultRepoServerContainerNames,
defaultRepoServerPrograms); test/e2e's TestOnlyRepoServersReachTheWebhook
holds both sides to the same pods.
*/}}
{{- define "cmp-injector.repoServerCEL" -}}
{{- $rc := default dict .Values.catalog.repoServerContainer }}
{{- $names := list "argocd-repo-server" "repo-server" }}
{{- if hasKey $rc "names" }}{{ $names = default list $rc.names }}{{ end }}
{{- $programs := list "argocd-repo-server" }}
{{- if hasKey $rc "programs" }}{{ $programs = default list $rc.programs }}{{ end }}
{{- $quoted := list }}
{{- range $programs }}{{ $quoted = append $quoted (regexQuoteMeta .) }}{{ end }}
{{- if $programs -}}
object.spec.containers.exists(c, c.name in {{ $names | toJson }} || (has(c.command) && c.command.exists(w, w.matches({{ printf "(^|[\\s/])(%s)(\\s|$)" (join "|" $quoted) | toJson }}))) || (has(c.args) && c.args.exists(w, w.matches({{ printf "(^|[\\s/])(%s)(\\s|$)" (join "|" $quoted) | toJson }}))))
{{- else -}}
object.spec.containers.exists(c, c.name in {{ $names | toJson }})
{{- end }}
{{- end }}

{{/*
The catalog's namespaces: catalog.namespaces, or when empty the default
{argocd: [helm, kustomize]}. The default lives here rather than in values.yaml
so that a user's map replaces it instead of being merged with it.
*/}}
{{- define "cmp-injector.namespaces" -}}
{{- if .Values.catalog.namespaces }}
{{- toYaml .Values.catalog.namespaces }}
{{- else }}
{{- toYaml (dict "argocd" (list "helm" "kustomize")) }}
{{- end }}
{{- end }}

{{/*
The admission mode: webhook or policy, checked. Policy mode needs the
admissionregistration.k8s.io/v1 MutatingAdmissionPolicy API (Kubernetes 1.36+).
*/}}
{{- define "cmp-injector.mode" -}}
{{- $mode := default "webhook" .Values.mode }}
{{- if not (has $mode (list "webhook" "policy")) }}
{{- fail (printf "mode must be webhook or policy, got %q" $mode) }}
{{- end }}
{{- if and (eq $mode "policy") (semverCompare "<1.36.0-0" (include "cmp-injector.kubeVersion" .)) }}
{{- fail (printf "mode policy needs Kubernetes 1.36 or later (MutatingAdmissionPolicy in admissionregistration.k8s.io/v1); this render targets %s: keep mode webhook, or set kubeVersion if the cluster is newer" (include "cmp-injector.kubeVersion" .)) }}
{{- end }}
{{- $mode }}
{{- end }}

{{/* Which namespaces and pods are reviewed: the webhook's selectors, and in
policy mode the bindings'. */}}
{{- define "cmp-injector.selectors" -}}
namespaceSelector:
  matchExpressions:
    - key: cmp-injector.io/enabled
      operator: In
      values: ["true"]
    {{- with .Values.webhook.namespaceSelectorExtraExpressions }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
objectSelector:
  matchExpressions:
    - key: cmp-injector.io/inject
      operator: In
      values: ["true"]
{{- end }}

{{/* serve's and policy's reconciler flags (reconciler.enabled). One Lease per
release: two releases in one namespace would share the default one, and only
one of their catalogs would be reconciled. */}}
{{- define "cmp-injector.reconcilerArgs" -}}
- --reconcile
- --leader-election-namespace={{ .Release.Namespace }}
- --leader-election-name={{ include "cmp-injector.fullname" . | trunc 52 | trimSuffix "-" }}-reconciler
- {{ printf "--namespace-selector=%s" (include "cmp-injector.namespaceSelector" .) | quote }}
- --rollout={{ .Values.reconciler.rollout }}
- --reconcile-resync={{ .Values.reconciler.resync }}
{{- end }}
