package harness

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// The names of the user's chain: the README's quick start installs the chart as
// release cmp-injector in namespace cmp-injector and patches Argo CD's
// argocd-repo-server Deployment in namespace argocd.
const (
	ArgoNamespace      = "argocd"
	InjectorNamespace  = "cmp-injector"
	Release            = "cmp-injector"
	RepoServerName     = "argocd-repo-server"
	RepoServerSelector = "app.kubernetes.io/name=argocd-repo-server"
)

// ReadmeSteps are the README quick start's commands the chain runs, read from
// README.md so the docs cannot drift from what is tested.
type ReadmeSteps struct {
	LabelKey, LabelValue string // kubectl label namespace argocd KEY=VALUE
	Patch                []byte // kubectl -n argocd patch deployment argocd-repo-server --type merge -p PATCH
}

// ReadReadme finds the label and patch commands in the sh blocks of README.md.
func ReadReadme(repoRoot string) (ReadmeSteps, error) {
	var steps ReadmeSteps
	b, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		return steps, err
	}
	for _, cmd := range shellCommands(string(b)) {
		switch {
		case len(cmd) == 5 && cmd[0] == "kubectl" && cmd[1] == "label" && cmd[2] == "namespace" && cmd[3] == ArgoNamespace:
			steps.LabelKey, steps.LabelValue, _ = strings.Cut(cmd[4], "=")
		case len(cmd) >= 6 && cmd[0] == "kubectl" && strings.Join(cmd[1:5], " ") == "-n "+ArgoNamespace+" patch deployment" && cmd[5] == RepoServerName:
			if len(cmd) != 10 || strings.Join(cmd[6:9], " ") != "--type merge -p" {
				return steps, fmt.Errorf("README's patch command changed shape: %q", cmd)
			}
			steps.Patch = []byte(cmd[9])
		}
	}
	if steps.LabelKey == "" || steps.Patch == nil {
		return steps, errors.New("README.md has no `kubectl label namespace argocd ...` and `kubectl -n argocd patch deployment argocd-repo-server --type merge -p '...'` commands")
	}
	if !json.Valid(steps.Patch) {
		return steps, fmt.Errorf("README's patch is not JSON: %s", steps.Patch)
	}
	return steps, nil
}

// LabelPatch is the merge patch `kubectl label namespace` sends.
func (s ReadmeSteps) LabelPatch() []byte {
	return []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, s.LabelKey, s.LabelValue))
}

// shellCommands splits the sh code blocks of a Markdown text into commands
// (continuation lines joined, comments dropped) and words (single and double
// quotes as sh reads them, without expansions).
func shellCommands(md string) [][]string {
	var cmds [][]string
	in := false
	var cur strings.Builder
	sc := bufio.NewScanner(strings.NewReader(md))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			in = strings.TrimPrefix(line, "```") == "sh"
			continue
		}
		if !in || strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		if strings.HasSuffix(line, `\`) {
			cur.WriteString(strings.TrimSuffix(line, `\`))
			continue
		}
		cur.WriteString(line)
		if words := splitWords(cur.String()); len(words) > 0 {
			cmds = append(cmds, words)
		}
		cur.Reset()
	}
	return cmds
}

func splitWords(s string) []string {
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		switch ch := s[i]; {
		case ch == '\'' || ch == '"':
			j := strings.IndexByte(s[i+1:], ch)
			if j < 0 {
				j = len(s) - i - 1
			}
			w.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case ch == '#' && !inWord:
			i = len(s) // a comment runs to the end of the line
		case ch == ' ' || ch == '\t':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteByte(ch)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}

// ApplyFile creates or replaces every object of a multi-document YAML file in
// ns, after replacing each key of subst by its value.
func (c *Client) ApplyFile(ns, path string, subst map[string]string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(b)
	for k, v := range subst {
		s = strings.ReplaceAll(s, k, v)
	}
	for _, doc := range strings.Split(s, "\n---\n") {
		obj := map[string]any{}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if obj["metadata"] == nil {
			continue
		}
		if err := c.ApplyObject(ns, obj); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return nil
}

// ApplyObject creates or replaces obj, of one of the kinds the tests apply
// from manifests, in ns when the kind is namespaced.
func (c *Client) ApplyObject(ns string, obj map[string]any) error {
	kind, _ := obj["kind"].(string)
	meta, _ := obj["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	core, rbac := "/api/v1/namespaces/"+ns+"/", "/apis/rbac.authorization.k8s.io/v1/"
	coll, namespaced := map[string]string{
		"ConfigMap": core + "configmaps", "Secret": core + "secrets", "ServiceAccount": core + "serviceaccounts",
		"Deployment": "/apis/apps/v1/namespaces/" + ns + "/deployments",
		"Role":       rbac + "namespaces/" + ns + "/roles", "RoleBinding": rbac + "namespaces/" + ns + "/rolebindings",
		"ClusterRole": rbac + "clusterroles", "ClusterRoleBinding": rbac + "clusterrolebindings",
	}[kind], !strings.HasPrefix(kind, "Cluster")
	if coll == "" || meta == nil {
		return fmt.Errorf("kind %q is not handled here", kind)
	}
	if namespaced {
		meta["namespace"] = ns
	}
	if err := c.Apply(coll, name, obj); err != nil {
		return fmt.Errorf("apply %s %s: %w", kind, name, err)
	}
	return nil
}

// ChartInstall is the chart installed by the real helm, with the injector
// booted from the Deployment helm stored.
type ChartInstall struct {
	Helm      *Helm
	Chart     string
	Injector  *Injector
	Pod       *BootedPod
	Output    string // what helm install printed
	installed bool
}

// InstallChart installs charts/cmp-injector as the chart README describes for
// clusters without cert-manager: `cmp-injector certs` makes the Secret, and its
// ca.crt is the caBundle. Then it boots the injector from the Deployment helm
// stored (BootChartInjector). How the apiserver reaches that process is the
// harness's business: the chart's webhook.url (its value for out-of-cluster
// injectors) points at the booted injector's loopback port instead of at the
// Service, which has no endpoints without a kubelet. helmArgs are added to the
// install command (-f FILE, --set ...).
func (cp *ControlPlane) InstallChart(injectorBin, root string, logTo io.Writer, helmArgs ...string) (*ChartInstall, error) {
	repo, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	c := cp.Client()
	helm, err := cp.NewHelm(filepath.Join(root, "helm"))
	if err != nil {
		return nil, err
	}
	secretYAML, err := exec.Command(injectorBin, "certs", "--service", Release, "--namespace", InjectorNamespace,
		"--ip", "127.0.0.1", "--secret-name", Release+"-tls").Output()
	if err != nil {
		return nil, fmt.Errorf("cmp-injector certs: %w", err)
	}
	var secret corev1.Secret
	if err := yaml.UnmarshalStrict(secretYAML, &secret); err != nil {
		return nil, fmt.Errorf("cmp-injector certs printed no Secret: %w\n%s", err, secretYAML)
	}
	// An earlier install in this control plane (helm uninstall keeps the
	// namespace and the Secret, which helm did not make) is no conflict.
	var apiErr *APIError
	if err := c.CreateNamespace(InjectorNamespace, nil); err != nil && (!asAPIError(err, &apiErr) || apiErr.Code != http.StatusConflict) {
		return nil, err
	}
	secret.Namespace = InjectorNamespace
	secret.APIVersion, secret.Kind = "v1", "Secret"
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&secret)
	if err != nil {
		return nil, err
	}
	if err := c.Apply("/api/v1/namespaces/"+InjectorNamespace+"/secrets", secret.Name, obj); err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	ci := &ChartInstall{Helm: helm, Chart: filepath.Join(repo, "charts", "cmp-injector")}
	args := append([]string{"install", Release, ci.Chart, "-n", InjectorNamespace, "--create-namespace",
		"--set", "certificates.mode=secret", "--set", "certificates.secretName=" + Release + "-tls",
		"--set", "certificates.caBundle=" + base64.StdEncoding.EncodeToString(secret.Data["ca.crt"]),
		"--set", fmt.Sprintf("webhook.url=https://127.0.0.1:%d/mutate", port)}, helmArgs...)
	ci.Output, err = helm.Run(args...)
	if err != nil {
		return nil, err
	}
	ci.installed = true
	// The injector's start-up dry run (nativeSidecars: auto) creates a pod
	// of the namespace's default ServiceAccount, which admission looks up:
	// on a real cluster it exists long before the injector's pod runs.
	if err := c.WaitServiceAccount(InjectorNamespace, DefaultServiceAccount, 60*time.Second); err != nil {
		_ = ci.Uninstall()
		return nil, err
	}
	ci.Injector, ci.Pod, err = BootChartInjector(c, InjectorNamespace, Release, injectorBin, filepath.Join(root, "pod"), port, logTo)
	if err != nil {
		_ = ci.Uninstall()
		return nil, err
	}
	return ci, nil
}

// Upgrade runs helm upgrade --reuse-values with args, then re-projects the
// injector pod's volumes as the kubelet would once the ConfigMap changed.
func (ci *ChartInstall) Upgrade(args ...string) error {
	if _, err := ci.Helm.Run(append([]string{"upgrade", Release, ci.Chart, "-n", InjectorNamespace, "--reuse-values"}, args...)...); err != nil {
		return err
	}
	return ci.Pod.Project()
}

// Uninstall runs helm uninstall --wait (once) and stops the booted injector.
func (ci *ChartInstall) Uninstall() error {
	var err error
	if ci.installed {
		_, err = ci.Helm.Run("uninstall", Release, "-n", InjectorNamespace, "--wait")
		ci.installed = false
	}
	if ci.Pod != nil {
		ci.Pod.Stop()
	}
	return err
}

// DeploymentPath is the API path of Deployment name in ns.
func DeploymentPath(ns, name string) string {
	return "/apis/apps/v1/namespaces/" + ns + "/deployments/" + name
}

// PatchDeployment applies a merge patch (strategic: a strategic merge patch,
// kubectl patch's default) and returns the Deployment's new generation.
func (c *Client) PatchDeployment(ns, name string, patch []byte, strategic bool) (int64, error) {
	path := DeploymentPath(ns, name)
	var err error
	if strategic {
		err = c.StrategicPatch(path, patch)
	} else {
		err = c.MergePatch(path, patch)
	}
	if err != nil {
		return 0, fmt.Errorf("patch %s: %w", patch, err)
	}
	var dep appsv1.Deployment
	if err := c.Get(path, &dep); err != nil {
		return 0, err
	}
	return dep.Generation, nil
}

// NewestReplicaSet is the ReplicaSet of the Deployment's current revision.
func (c *Client) NewestReplicaSet(ns, name, selector string) (*appsv1.ReplicaSet, *appsv1.Deployment, error) {
	var dep appsv1.Deployment
	if err := c.Get(DeploymentPath(ns, name), &dep); err != nil {
		return nil, nil, err
	}
	var list appsv1.ReplicaSetList
	q := map[string][]string{"labelSelector": {selector}}
	if err := c.Do(http.MethodGet, "/apis/apps/v1/namespaces/"+ns+"/replicasets", q, nil, &list); err != nil {
		return nil, nil, err
	}
	const revision = "deployment.kubernetes.io/revision"
	rev := dep.Annotations[revision]
	for i := range list.Items {
		if rev != "" && list.Items[i].Annotations[revision] == rev {
			return &list.Items[i], &dep, nil
		}
	}
	return nil, &dep, fmt.Errorf("no ReplicaSet of revision %q yet", rev)
}

// templateOf reports whether rs runs dep's pod template, as the Deployment
// controller compares them: equal but for the pod-template-hash label.
func templateOf(rs *appsv1.ReplicaSet, dep *appsv1.Deployment) bool {
	t := rs.Spec.Template.DeepCopy()
	delete(t.Labels, "pod-template-hash")
	return equality.Semantic.DeepEqual(*t, dep.Spec.Template)
}

// Rollout is a Deployment's newest ReplicaSet and its live pods.
type Rollout struct {
	ReplicaSet appsv1.ReplicaSet
	Pods       []corev1.Pod
}

// WaitRollout waits until the Deployment controller observed generation
// minGeneration and the newest ReplicaSet has replicas live pods, all stored
// injected (with the status annotation), or, when injected is false, none of
// them injected: a pod stored otherwise fails at once.
func (c *Client) WaitRollout(ns, name, selector string, minGeneration int64, replicas int, injected bool, timeout time.Duration) (Rollout, error) {
	var wrong error
	var r Rollout
	err := Eventually(timeout, 100*time.Millisecond, func() (bool, error) {
		rs, dep, err := c.NewestReplicaSet(ns, name, selector)
		if err != nil {
			return false, err
		}
		if dep.Status.ObservedGeneration < minGeneration {
			return false, fmt.Errorf("the Deployment controller has not seen generation %d", minGeneration)
		}
		// The controller can observe a generation without making its
		// ReplicaSet: a template change seen together with a replicas change
		// is first handled as a scaling event (status updated, no new
		// ReplicaSet), so the revision's ReplicaSet can still be the old one.
		if !templateOf(rs, dep) {
			return false, fmt.Errorf("ReplicaSet %s is not of the Deployment's current template yet", rs.Name)
		}
		pods, err := c.ListPods(ns, "pod-template-hash="+rs.Labels["pod-template-hash"])
		if err != nil {
			return false, err
		}
		var live []corev1.Pod
		for _, p := range pods {
			if p.DeletionTimestamp == nil {
				live = append(live, p)
			}
		}
		r = Rollout{ReplicaSet: *rs, Pods: live}
		if len(live) != replicas {
			return false, fmt.Errorf("ReplicaSet %s has %d of %d pods", rs.Name, len(live), replicas)
		}
		for _, p := range live {
			_, ok := p.Annotations[keys.StatusAnnotation]
			switch {
			case !injected && ok:
				wrong = fmt.Errorf("pod %s was injected", p.Name)
				return true, nil
			case injected && !ok:
				return false, fmt.Errorf("pod %s is not injected", p.Name)
			}
		}
		return true, nil
	})
	if wrong != nil {
		return r, wrong
	}
	return r, err
}
