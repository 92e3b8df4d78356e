package doctor

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cmp-injector/cmp-injector/injector/reconcile"
	"github.com/cmp-injector/cmp-injector/pkg/inject"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// podPageSize bounds how many pods doctor holds at once: each page is
// checked and dropped before the next is read, so the pods' size (a
// 10 KiB annotation on each of 3,000 pods in an attack run) never adds up.
const podPageSize = 500

// skippedShown is how many namespaces the skipped-pods line names.
const skippedShown = 5

// checkPods checks every labelled pod in the namespaces the webhook selects.
// Pods elsewhere are only counted: the webhook is never called for them, and
// anyone who may create a pod anywhere can label it, so failing each one
// (2,000 ✘ lines in an attack run) buried what mattered.
func (d *doctor) checkPods(ctx context.Context) {
	g := d.report.group("repo-server pods")
	first := len(g.Checks)
	skipped := map[string]int{}
	checked := 0
	opts := metav1.ListOptions{LabelSelector: keys.InjectLabel + "=" + keys.EnabledValue, Limit: podPageSize}
	for {
		pods, err := d.client.CoreV1().Pods("").List(ctx, opts)
		if err != nil {
			g.fail(checkPodsListable, "cannot list pods: "+err.Error(), "")
			break
		}
		for i := range pods.Items {
			pod := &pods.Items[i]
			// With the namespaces unknown (their list failed) every pod is
			// checked, as doctor cannot tell which the webhook sees.
			if d.enabled != nil && !d.enabled[pod.Namespace] {
				skipped[pod.Namespace]++
				continue
			}
			checked++
			d.checkPod(ctx, g, pod)
		}
		if pods.Continue == "" {
			break
		}
		if pods.Continue == opts.Continue {
			// A server that hands back the token it was given would keep
			// doctor listing the same page forever.
			g.fail(checkPodsListable, "cannot list pods: the API server repeated continue token "+strconv.Quote(opts.Continue), "")
			break
		}
		opts.Continue = pods.Continue
	}
	// Pages come in the server's order; the report is in pod order, each
	// pod's checks in the order they were made.
	pods := g.Checks[first:]
	sort.SliceStable(pods, func(i, j int) bool { return pods[i].podID < pods[j].podID })
	if checked == 0 && len(skipped) == 0 {
		g.pass(checkPodsSkipped, "no pod carries "+keys.InjectLabel+"="+keys.EnabledValue+" yet")
	}
	if len(skipped) > 0 {
		d.report.SkippedPods = skipped
		g.pass(checkPodsSkipped, skippedMessage(skipped))
	}
}

// skippedMessage is the one line for labelled pods outside the enabled
// namespaces: how many, and the namespaces with the most of them.
func skippedMessage(skipped map[string]int) string {
	names := make([]string, 0, len(skipped))
	total := 0
	for ns, n := range skipped {
		names = append(names, ns)
		total += n
	}
	sort.Slice(names, func(i, j int) bool {
		if skipped[names[i]] != skipped[names[j]] {
			return skipped[names[i]] > skipped[names[j]]
		}
		return names[i] < names[j]
	})
	var shown []string
	for _, ns := range names[:min(len(names), skippedShown)] {
		shown = append(shown, fmt.Sprintf("%s: %d", ns, skipped[ns]))
	}
	if len(names) > skippedShown {
		shown = append(shown, "…")
	}
	return fmt.Sprintf("skipped %d pod(s) labelled %s=%s in %d namespace(s) the webhook does not select (%s): it is never called for them; to enable one, kubectl label namespace NS %s=%s",
		total, keys.InjectLabel, keys.EnabledValue, len(names), strings.Join(shown, ", "), keys.NamespaceEnabledLabel, keys.EnabledValue)
}

func (d *doctor) checkPod(ctx context.Context, g *Group, pod *corev1.Pod) {
	pr := &PodReport{Namespace: pod.Namespace, Name: pod.Name}
	if d.checkPodState(ctx, g, pod, pr) && d.cat != nil {
		d.checkPodConfig(g, pod, pr)
	}
}

// checkPodConfig flags config annotations that are not the catalog's: the
// sidecar serves them as its plugin.yaml (an attack run's edited one was
// reported only as "not injected" or as a pending update).
func (d *doctor) checkPodConfig(g *Group, pod *corev1.Pod, pr *PodReport) {
	id := pod.Namespace + "/" + pod.Name
	for _, p := range inject.CheckConfigAnnotations(pod, d.cat) {
		var hint string
		switch {
		case !pr.Injected:
			hint = "cmp-injector writes this annotation only when it injects a pod, and the webhook refuses pods that carry it: remove it from the pod's template and recreate the pod"
		case pr.Revision == d.cat.Revision:
			hint = "cmp-injector wrote catalog revision " + d.cat.Revision + "'s config, so it was edited on the pod since, while the webhook did not review its updates; the sidecar serves it: kubectl -n " +
				pod.Namespace + " delete pod " + pod.Name + " (its controller recreates it with the catalog's), and find who edited it in the API server's audit log"
		default:
			hint = "written at catalog revision " + pr.Revision + " or edited since; the sidecar serves it until the reconciler replaces it with revision " + d.cat.Revision +
				"'s (is it on and leading? See the reconciler group below), or until the pod is recreated"
		}
		g.failPod(checkPodConfigOwned, pr, id+": plugin config not the catalog's: "+p.Message, hint)
	}
}

// checkPodState reports whether the pod is injected and current; it returns
// false for a pod doctor leaves alone, as the webhook does.
func (d *doctor) checkPodState(ctx context.Context, g *Group, pod *corev1.Pod, pr *PodReport) bool {
	id := pod.Namespace + "/" + pod.Name
	_, pr.Injected = pod.Annotations[keys.StatusAnnotation]
	var r *inject.Report
	if !pr.Injected && d.cat != nil {
		r = inject.Inject(pod, pod.Namespace, d.cat)
		// argo-helm's global.podLabels labels every Argo CD pod: the webhook
		// leaves those that are not repo-servers alone, and so does doctor.
		if r.Decision == inject.Skipped && r.Reasons[0] == inject.ReasonNotRepoServer {
			g.passPod(checkPodRepoServer, pr, id+": labelled but not a repo-server: left alone, as the webhook leaves it")
			return false
		}
	}
	switch {
	case !pr.Injected && d.cat == nil:
		g.failPod(checkPodInjected, pr, id+": not injected (no catalog to say why)", "")
		return true
	case !pr.Injected:
		switch r.Decision {
		case inject.Injected:
			g.failPod(checkPodInjected, pr, id+": not injected, though it would be now: it was created before its namespace was enabled or while the webhook was unavailable (failurePolicy Ignore)",
				"restart it: kubectl -n "+pod.Namespace+" delete pod "+pod.Name+" (its controller recreates it, injected)")
		default:
			g.failPod(checkPodInjected, pr, id+": not injected: "+r.Message(), "fix the pod's annotations; cmp-injector explain --catalog FILE -f pod.yaml says the same offline")
		}
		return true
	}
	if d.cat == nil {
		g.passPod(checkPodInjected, pr, id+": injected")
		return true
	}
	dr, err := inject.CheckDrift(pod, d.cat)
	if err != nil {
		g.failPod(checkPodStatus, pr, id+": "+err.Error(), "")
		return true
	}
	pr.Plugins, pr.Revision, pr.Stale = dr.Status.Plugins, dr.Recorded.Revision, dr.Stale
	// A config the pod carries but that differs is flagged by
	// checkPodConfig; only a missing one is merely pending here.
	var missing []string
	for k := range dr.Live {
		p := strings.TrimPrefix(k, keys.ConfigAnnotationPrefix)
		pr.Pending = append(pr.Pending, p)
		if _, ok := pod.Annotations[k]; !ok {
			missing = append(missing, p)
		}
	}
	sort.Strings(pr.Pending)
	sort.Strings(missing)
	pr.Current = dr.Current() && pr.Revision == d.cat.Revision
	switch {
	case len(dr.Stale) > 0:
		g.failPod(checkPodCurrent, pr, fmt.Sprintf("%s: stale: injected [%s] at catalog revision %s, the catalog is at %s: %s",
			id, strings.Join(pr.Plugins, ", "), pr.Revision, d.cat.Revision, dr.StaleMessage()),
			"restart it to apply the catalog: "+d.restartHint(ctx, pod))
	case len(missing) > 0:
		g.failPod(checkPodConfigLive, pr, fmt.Sprintf("%s: plugin.yaml of %s not yet updated to catalog revision %s", id, strings.Join(missing, ", "), d.cat.Revision),
			"the reconciler updates it live: is it on (reconciler.enabled) and leading? See the reconciler group below")
	case len(pr.Pending) > 0:
		// Its config differs: checkPodConfig's line says so, once.
	default:
		g.passPod(checkPodCurrent, pr, fmt.Sprintf("%s: injected [%s], current with catalog revision %s", id, strings.Join(pr.Plugins, ", "), d.cat.Revision))
	}
	d.checkSidecars(g, pod, pr, dr.Status)
	return true
}

// checkSidecars reports restarts of the containers the injector owns and how
// each last ended.
func (d *doctor) checkSidecars(g *Group, pod *corev1.Pod, pr *PodReport, st inject.Status) {
	owned := append(append([]string{}, st.InitContainers...), st.Containers...)
	for _, cs := range append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		if !slices.Contains(owned, cs.Name) || cs.RestartCount == 0 {
			continue
		}
		if pr.Restarts == nil {
			pr.Restarts = map[string]int32{}
		}
		pr.Restarts[cs.Name] = cs.RestartCount
		last := "unknown"
		if t := cs.LastTerminationState.Terminated; t != nil {
			last = fmt.Sprintf("%s (exit %d) at %s", t.Reason, t.ExitCode, t.FinishedAt.UTC().Format(time.RFC3339))
		}
		hint := "kubectl -n " + pod.Namespace + " logs " + pod.Name + " -c " + cs.Name + " --previous"
		if t := cs.LastTerminationState.Terminated; t != nil && t.Reason == "OOMKilled" {
			hint += "; raise the plugin's memory limit in the catalog (resources)"
		}
		g.add(checkSidecarRestarts, false, fmt.Sprintf("%s/%s: container %s restarted %d time(s); last ended %s", pod.Namespace, pod.Name, cs.Name, cs.RestartCount, last),
			hint, nil, pod.Namespace+"/"+pod.Name)
	}
}

// restartHint names the command that replaces the pod: a rollout restart of
// its workload only when the cluster proves that workload owns the pod (the
// reconciler's proof: a pod may name any ReplicaSet as its controller, and a
// hint to restart someone else's Deployment is how an admin would be led to
// do it), else deleting the pod, with the reason.
func (d *doctor) restartHint(ctx context.Context, pod *corev1.Pod) string {
	owner, err := reconcile.ProveOwner(ctx, d.client, pod)
	switch {
	case err == nil && owner.Deployment != nil:
		return "kubectl -n " + pod.Namespace + " rollout restart deployment/" + owner.Ref.Name + " (or set reconciler.rollout=auto)"
	case err == nil && owner.Ref != nil:
		return "kubectl -n " + pod.Namespace + " rollout restart " + strings.ToLower(owner.Ref.Kind) + "/" + owner.Ref.Name
	case err != nil:
		return "kubectl -n " + pod.Namespace + " delete pod " + pod.Name + " (its owner cannot be read: " + err.Error() + ")"
	case owner.Superseded:
		return "wait: a rollout is replacing it (" + owner.Reason + "); if it stays, kubectl -n " + pod.Namespace + " delete pod " + pod.Name
	case owner.Reason != "":
		return "kubectl -n " + pod.Namespace + " delete pod " + pod.Name + " (its owner is not proven: " + owner.Reason + ")"
	}
	return "kubectl -n " + pod.Namespace + " delete pod " + pod.Name
}
