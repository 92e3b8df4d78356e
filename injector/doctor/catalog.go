package doctor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/cmp-injector/cmp-injector/injector/sidecarprobe"
	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

func (d *doctor) checkCatalog(ctx context.Context) {
	g := d.report.group("catalog")
	var data []byte
	var source string
	switch {
	case d.catalogFile != "":
		b, err := os.ReadFile(d.catalogFile)
		if err != nil {
			g.fail(checkCatalogSource, "catalog "+d.catalogFile+": "+err.Error(), "")
			return
		}
		data, source = b, d.catalogFile
	case d.injector != nil:
		name, key := catalogSource(d.injector)
		cm, err := d.client.CoreV1().ConfigMaps(d.namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			g.fail(checkCatalogSource, "catalog ConfigMap "+d.namespace+"/"+name+": "+err.Error(), "the chart renders it from catalog.* values; reinstall")
			return
		}
		data, source = []byte(cm.Data[key]), "ConfigMap "+d.namespace+"/"+name
	default:
		g.fail(checkCatalogSource, "no injector Deployment in namespace "+d.namespace+" to read the catalog of", "pass --namespace (the release namespace) or --catalog FILE")
		return
	}
	cat, err := catalog.Parse(data)
	if err != nil {
		g.fail(checkCatalogValid, source+" is not a valid catalog: "+err.Error(), "")
		return
	}
	ans := d.askSidecarKind(ctx, cat)
	if cat.Defaults.NativeSidecarsAuto && ans.err == nil {
		// The pods are judged against the catalog as the injector
		// resolves it (pods.current compares the sidecar kind).
		answered := func(string) (bool, string, error) { return ans.decision.Native, ans.decision.Reason, nil }
		if cat, err = catalog.ParseWith(data, catalog.Options{NativeSidecars: answered}); err != nil {
			g.fail(checkCatalogValid, source+" is not a valid catalog: "+err.Error(), "")
			return
		}
	}
	d.cat = cat
	msg := fmt.Sprintf("%s loads: revision %s, plugins %s", source, cat.Revision, strings.Join(cat.Names, ", "))
	for _, name := range cat.Names {
		if e := cat.Plugins[name]; e.Rules.IsSet() {
			msg += fmt.Sprintf("; %s serves %s", name, e.Rules.Describe())
		}
	}
	g.pass(checkCatalogValid, msg)
	d.checkSidecarKind(g, cat, ans)
}

// sidecarAnswer is what the dry run of a native sidecar said, where.
type sidecarAnswer struct {
	asked     bool
	namespace string
	decision  sidecarprobe.Decision
	err       error
}

// askSidecarKind dry-runs a pod with a native sidecar, as the injector does
// for auto, unless the catalog injects classic sidecars (which every API
// server takes). It asks in the namespace of the repo-servers the catalog
// names, where the injected pods are created, with doctor's user's
// credentials; the injector's own namespace when the catalog names none.
func (d *doctor) askSidecarKind(ctx context.Context, cat *catalog.Catalog) sidecarAnswer {
	if !cat.Defaults.NativeSidecarsAuto && !cat.Defaults.NativeSidecars {
		return sidecarAnswer{}
	}
	ans := sidecarAnswer{asked: true, namespace: d.namespace}
	for _, ns := range cat.Namespaces() {
		if ns != catalog.AllNamespaces {
			ans.namespace = ns
			break
		}
	}
	ans.decision, ans.err = sidecarprobe.Probe(ctx, d.client, ans.namespace, cat.Defaults.CopyImage)
	return ans
}

// checkSidecarKind: native sidecars are init containers with restartPolicy
// Always and a postStart gate. An API server without them refuses every
// injected pod ("initContainers[N].lifecycle: Forbidden: may not be set for
// init containers", seen on v1.27.16), so every repo-server rollout stops.
// Whether it has them is its answer to the dry run, not its version: 1.28 has
// them only with the SidecarContainers feature gate on, 1.29 to 1.32 unless
// it is turned off. The version decides only when doctor may not ask.
func (d *doctor) checkSidecarKind(g *Group, cat *catalog.Catalog, ans sidecarAnswer) {
	where := " (a dry-run pod in namespace " + ans.namespace + ")"
	switch u, _ := errors.AsType[*sidecarprobe.Undecided](ans.err); {
	case !ans.asked:
		g.pass(checkCatalogSidecarKind, "classic sidecars (defaults.nativeSidecars: false): any Kubernetes version")
	case ans.err == nil && cat.Defaults.NativeSidecarsAuto:
		kind := map[bool]string{true: "native", false: "classic"}[ans.decision.Native]
		g.pass(checkCatalogSidecarKind, "defaults.nativeSidecars: auto, which the injector resolves at start-up as doctor did: "+kind+" sidecars, since "+ans.decision.Reason+where)
	case ans.err == nil && ans.decision.Native:
		g.pass(checkCatalogSidecarKind, "native sidecars: "+ans.decision.Reason+where)
	case ans.err == nil:
		g.fail(checkCatalogSidecarKind, "the catalog injects native sidecars and "+ans.decision.Reason+where+": every injected pod is refused", "")
	case u == nil || !u.Forbidden:
		g.fail(checkCatalogSidecarKind, "cannot tell whether the API server accepts native sidecars: "+ans.err.Error()+where,
			"the injector makes the same dry run for defaults.nativeSidecars: auto in its own namespace; see what refused the pod")
	case cat.Defaults.NativeSidecarsAuto:
		// The injector asks with its own rights; webhook.ready fails if
		// it could not.
		g.pass(checkCatalogSidecarKind, "defaults.nativeSidecars: auto: the injector resolves it at start-up by a dry run, which doctor may not make ("+ans.err.Error()+"); "+d.sidecarKindByVersion())
	default:
		d.sidecarKindFromVersion(g, "doctor may not dry-run a pod to ask the API server ("+ans.err.Error()+"), so by its version: ")
	}
}

// sidecarKindByVersion says what the version suggests, for auto.
func (d *doctor) sidecarKindByVersion() string {
	switch {
	case d.minor == 0:
		return "the API server's version is not one doctor can read"
	case d.minor >= 29:
		return fmt.Sprintf("Kubernetes 1.%d has native sidecars unless the SidecarContainers feature gate is off", d.minor)
	case d.minor == 28:
		return "Kubernetes 1.28 has native sidecars only with the SidecarContainers feature gate on"
	}
	return fmt.Sprintf("Kubernetes 1.%d has no native sidecars", d.minor)
}

// sidecarKindFromVersion is the check by the server's version, when doctor
// may not ask.
func (d *doctor) sidecarKindFromVersion(g *Group, why string) {
	switch {
	case d.minor == 0:
		g.pass(checkCatalogSidecarKind, why+"native sidecars, which need Kubernetes 1.29+ (the API server's version is not one doctor can read)")
	case d.minor >= 29:
		g.pass(checkCatalogSidecarKind, why+fmt.Sprintf("native sidecars on Kubernetes 1.%d (1.29+ has them on by default)", d.minor))
	case d.minor == 28:
		g.fail(checkCatalogSidecarKind, why+"the catalog injects native sidecars and Kubernetes 1.28 has them only with the SidecarContainers feature gate on (alpha, off by default): without it the API server refuses every injected pod", "")
	default:
		g.fail(checkCatalogSidecarKind, why+fmt.Sprintf("the catalog injects native sidecars, which Kubernetes 1.%d does not have: the API server refuses every injected pod (init containers may not have a lifecycle or a restartPolicy)", d.minor), "")
	}
}

// kubeMinor is the minor of a gitVersion such as v1.27.16 or v1.28.3-eks-1 (0
// when it is not one).
func kubeMinor(gitVersion string) int {
	var major, minor int
	if _, err := fmt.Sscanf(gitVersion, "v%d.%d", &major, &minor); err != nil || major != 1 {
		return 0
	}
	return minor
}

// catalogSource is the ConfigMap and key the Deployment reads its catalog from.
func catalogSource(dep *appsv1.Deployment) (name, key string) {
	key = "catalog.yaml"
	for _, c := range dep.Spec.Template.Spec.Containers {
		for _, a := range c.Args {
			if v, ok := strings.CutPrefix(a, "--catalog="); ok {
				key = path.Base(v)
			}
		}
	}
	for _, v := range dep.Spec.Template.Spec.Volumes {
		if v.Name == "catalog" && v.ConfigMap != nil {
			name = v.ConfigMap.Name
		}
	}
	return name, key
}

func (d *doctor) checkNamespaces(ctx context.Context) {
	g := d.report.group("namespaces")
	sel := labels.SelectorFromSet(labels.Set{keys.NamespaceEnabledLabel: keys.EnabledValue})
	if len(d.webhooks) > 0 {
		if s, err := metav1.LabelSelectorAsSelector(d.webhooks[0].hook.NamespaceSelector); err == nil {
			sel = s
		}
	}
	list, err := d.client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		// enabled stays nil: checkPods then checks every labelled pod
		// rather than skip them all.
		g.fail(checkNamespacesListable, "cannot list namespaces: "+err.Error(), "")
		return
	}
	d.enabled = map[string]bool{}
	var names []string
	for _, n := range list.Items {
		d.enabled[n.Name] = true
		names = append(names, n.Name)
	}
	hint := "kubectl label namespace argocd " + keys.NamespaceEnabledLabel + "=" + keys.EnabledValue
	if len(names) == 0 {
		g.fail(checkNamespacesEnabled, "no namespace matches the webhook's namespaceSelector "+sel.String()+": nothing is injected", hint)
	} else {
		g.pass(checkNamespacesEnabled, fmt.Sprintf("%d namespace(s) enabled: %s", len(names), strings.Join(names, ", ")))
	}
	if d.cat == nil {
		return
	}
	for _, ns := range d.cat.Namespaces() {
		if ns != catalog.AllNamespaces && !d.enabled[ns] {
			g.fail(checkCatalogNamespaces, "the catalog gives plugins to namespace "+ns+", which the webhook does not select",
				"kubectl label namespace "+ns+" "+keys.NamespaceEnabledLabel+"="+keys.EnabledValue)
		}
	}
}
