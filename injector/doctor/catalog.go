package doctor

import (
	"context"
	"fmt"
	"os"
	"path"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

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
	d.cat = cat
	msg := fmt.Sprintf("%s loads: revision %s, plugins %s", source, cat.Revision, strings.Join(cat.Names, ", "))
	for _, name := range cat.Names {
		if e := cat.Plugins[name]; e.Rules.IsSet() {
			msg += fmt.Sprintf("; %s serves %s", name, e.Rules.Describe())
		}
	}
	g.pass(checkCatalogValid, msg)
	d.checkSidecarKind(g, cat)
}

// checkSidecarKind: native sidecars are init containers with restartPolicy
// Always and a postStart gate. Kubernetes 1.28 has them only behind the
// SidecarContainers feature gate (alpha, off by default) and 1.27 not at all:
// there the API server refuses every injected pod ("initContainers[N].lifecycle:
// Forbidden: may not be set for init containers", seen on v1.27.16), so every
// repo-server rollout stops.
func (d *doctor) checkSidecarKind(g *Group, cat *catalog.Catalog) {
	switch {
	case !cat.Defaults.NativeSidecars:
		g.pass(checkCatalogSidecarKind, "classic sidecars (defaults.nativeSidecars: false): any Kubernetes version")
	case d.minor == 0:
		g.pass(checkCatalogSidecarKind, "native sidecars, which need Kubernetes 1.29+ (the API server's version is not one doctor can read)")
	case d.minor >= 29:
		g.pass(checkCatalogSidecarKind, fmt.Sprintf("native sidecars on Kubernetes 1.%d (1.29+ has them on by default)", d.minor))
	case d.minor == 28:
		g.fail(checkCatalogSidecarKind, "the catalog injects native sidecars and Kubernetes 1.28 has them only with the SidecarContainers feature gate on (alpha, off by default): without it the API server refuses every injected pod", "")
	default:
		g.fail(checkCatalogSidecarKind, fmt.Sprintf("the catalog injects native sidecars, which Kubernetes 1.%d does not have: the API server refuses every injected pod (init containers may not have a lifecycle or a restartPolicy)", d.minor), "")
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
