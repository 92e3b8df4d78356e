package harness

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cmp-injector/cmp-injector/pkg/serving/servingtest"
)

// BootOptions say how to run a stored pod's containers as local processes.
type BootOptions struct {
	// Root is a short directory (unix socket paths are limited to 108 bytes).
	Root string
	// Images maps an absolute path inside an image to a local file, e.g. the
	// cmp-server image's /usr/local/bin/cmp-server to a freshly built binary;
	// any argv element naming such a path is mapped.
	Images map[string]string
	// Run decides which containers run; the others (the repo-server itself,
	// Argo CD's copyutil) need images this machine does not have.
	Run func(name string) bool
	// ConfigDirFlag is appended as "<flag>=<mapped dir>" to a container whose
	// command reads its config from ConfigDir by default.
	ConfigDir, ConfigDirFlag string
	// SocketDirEnv is set to the mapped socket directory, SocketDir.
	SocketDir, SocketDirEnv string
	// Env is added to every container's env, before the container's own: it
	// stands in for what the image provides (PATH to its tools).
	Env []string
	// Entrypoints maps an image repository (the image without its tag) to its
	// entrypoint, for containers that give only args, as Argo CD's do.
	Entrypoints map[string][]string
	// ImageEnv maps an image repository to extra env its image declares (HOME).
	ImageEnv map[string][]string
	// Rewrite, when set, adjusts a container's mapped argv: the one place a boot
	// changes what a container runs, for what a pod's own network namespace
	// would give it (its ports), since every booted pod shares loopback here.
	Rewrite func(c corev1.Container, argv []string) []string
	// Objects resolves configMap and secret volumes and env references, as the
	// kubelet does from the apiserver. Nil: such pods cannot be booted.
	Objects ObjectSource
	LogTo   io.Writer
}

// ObjectSource reads the ConfigMaps and Secrets a pod refers to (found is false
// when the object does not exist) and issues the service-account tokens its
// projected volumes ask for.
type ObjectSource interface {
	ConfigMapData(ns, name string) (data map[string]string, found bool, err error)
	SecretData(ns, name string) (data map[string][]byte, found bool, err error)
	PodToken(pod *corev1.Pod, src *corev1.ServiceAccountTokenProjection) (string, error)
}

// BootedPod is a pod whose selected init containers ran to completion and whose
// long-running containers are running.
type BootedPod struct {
	Volumes map[string]string // volume name → host directory
	pod     *corev1.Pod
	procs   []*Process
	opts    BootOptions
	// mounted are the volumes a container this boot runs mounts: only those
	// are projected, so a pod whose Argo CD containers are not run needs no
	// token or object source for their volumes (kube-api-access-*).
	mounted map[string]bool
}

// Stop ends every long-running container process.
func (b *BootedPod) Stop() {
	for _, p := range b.procs {
		_ = p.Stop(10 * time.Second)
	}
}

// Processes are the running containers.
func (b *BootedPod) Processes() []*Process { return b.procs }

// BootPod gives every volume of pod a host directory (emptyDir: empty;
// downwardAPI: the projected annotations and labels), runs the selected init
// containers in order, then starts the selected restartable init containers
// (native sidecars) and containers. Container paths in command, args and env
// values are rewritten to the host directories of the volumes mounted there,
// which is the only liberty taken: the argv, env and files are the pod's own.
func BootPod(pod *corev1.Pod, o BootOptions) (*BootedPod, error) {
	b := &BootedPod{Volumes: map[string]string{}, opts: o, pod: pod, mounted: map[string]bool{}}
	for _, c := range append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		for _, m := range c.VolumeMounts {
			b.mounted[m.Name] = b.mounted[m.Name] || o.Run(c.Name)
		}
	}
	for _, v := range pod.Spec.Volumes {
		dir := filepath.Join(o.Root, "v", v.Name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		b.Volumes[v.Name] = dir
	}
	if err := b.Project(); err != nil {
		return nil, err
	}
	for _, c := range pod.Spec.InitContainers {
		if !o.Run(c.Name) {
			continue
		}
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			p, err := b.start(c, o)
			if err != nil {
				b.Stop()
				return nil, err
			}
			b.procs = append(b.procs, p)
			// The kubelet starts the next container only once a native
			// sidecar's postStart hook returned and its startupProbe (if
			// any) passed.
			if err := b.postStart(c); err != nil {
				b.Stop()
				return nil, err
			}
			if err := b.waitStartup(c); err != nil {
				b.Stop()
				return nil, err
			}
			continue
		}
		p, err := b.start(c, o)
		if err != nil {
			return nil, err
		}
		if err := p.Wait(60 * time.Second); err != nil {
			return nil, fmt.Errorf("init container %s: %w\n%s", c.Name, err, p.Output())
		}
	}
	for _, c := range pod.Spec.Containers {
		if !o.Run(c.Name) {
			continue
		}
		p, err := b.start(c, o)
		if err != nil {
			b.Stop()
			return nil, err
		}
		b.procs = append(b.procs, p)
	}
	return b, nil
}

func (b *BootedPod) start(c corev1.Container, o BootOptions) (*Process, error) {
	argv := append(append([]string{}, c.Command...), c.Args...)
	if len(c.Command) == 0 {
		ep, ok := o.Entrypoints[imageRepository(c.Image)]
		if !ok && len(c.Args) > 0 {
			return nil, fmt.Errorf("container %s gives only args and the entrypoint of %s is not known here", c.Name, c.Image)
		}
		argv = append(append([]string{}, ep...), c.Args...)
	}
	argv, env, dir, err := b.command(c, argv, o)
	if err != nil {
		return nil, err
	}
	if o.Rewrite != nil {
		argv = o.Rewrite(c, argv)
	}
	return Start(c.Name, argv, env, dir, o.LogTo)
}

// imageRepository is an image reference without its tag or digest.
func imageRepository(image string) string {
	if i := strings.Index(image, "@"); i >= 0 {
		image = image[:i]
	}
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		image = image[:i]
	}
	return image
}

// postStart runs an exec postStart hook of c as the kubelet does: once,
// after the container started, holding everything after it until it returns;
// a failure is the container's.
func (b *BootedPod) postStart(c corev1.Container) error {
	if c.Lifecycle == nil || c.Lifecycle.PostStart == nil || c.Lifecycle.PostStart.Exec == nil {
		return nil
	}
	if out, err := b.Exec(b.pod, c.Name, c.Lifecycle.PostStart.Exec.Command); err != nil {
		return fmt.Errorf("container %s: postStart hook failed: %w: %s", c.Name, err, out)
	}
	return nil
}

// waitStartup runs an exec startupProbe of c as the kubelet does, until it
// passes or its failureThreshold × periodSeconds budget is spent.
func (b *BootedPod) waitStartup(c corev1.Container) error {
	pr := c.StartupProbe
	if pr == nil || pr.Exec == nil {
		return nil
	}
	period := time.Duration(max(pr.PeriodSeconds, 1)) * time.Second
	budget := time.Duration(max(pr.FailureThreshold, 1)) * period
	var last error
	err := Eventually(budget, period/4, func() (bool, error) {
		out, err := b.Exec(b.pod, c.Name, pr.Exec.Command)
		if err != nil {
			last = fmt.Errorf("%w: %s", err, out)
		}
		return err == nil, last
	})
	if err != nil {
		return fmt.Errorf("container %s: startupProbe never passed: %w", c.Name, err)
	}
	return nil
}

// Exec runs argv inside a booted container of pod the way the kubelet runs an
// exec probe there: with the container's env, mounts and working directory, and
// the same path rewriting and config-dir and socket-dir liberties as the
// container's own command. It returns the output and the error of a non-zero exit.
func (b *BootedPod) Exec(pod *corev1.Pod, container string, argv []string) (string, error) {
	var c *corev1.Container
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if list[i].Name == container {
				c = &list[i]
			}
		}
	}
	if c == nil {
		return "", fmt.Errorf("pod has no container %s", container)
	}
	argv, env, dir, err := b.command(*c, append([]string{}, argv...), b.opts)
	if err != nil {
		return "", err
	}
	p, err := Start(container+" exec", argv, env, dir, nil)
	if err != nil {
		return "", err
	}
	if err := p.Wait(30 * time.Second); err != nil {
		_ = p.Stop(time.Second)
		return p.Output(), fmt.Errorf("exec %q in %s: %w", argv, container, err)
	}
	return p.Output(), nil
}

// command maps argv (a container path first) and the container's env to this
// machine, and makes the container's working directory.
func (b *BootedPod) command(c corev1.Container, argv []string, o BootOptions) (mapped, env []string, dir string, err error) {
	m, err := b.mapper(c, o.Root)
	if err != nil {
		return nil, nil, "", err
	}
	if len(argv) == 0 {
		return nil, nil, "", fmt.Errorf("container %s: no command (image entrypoints are not known here)", c.Name)
	}
	for i := range argv {
		if i == 2 && isShellScript(argv) {
			// copyutil since Argo CD v3.3 runs `sh -c "cp … && ln …"`: each
			// word of the script that is a path is mapped as an element is.
			words := strings.Split(argv[i], " ")
			for j, w := range words {
				if local, ok := o.Images[w]; ok {
					words[j] = local
				} else {
					words[j] = m.path(w)
				}
			}
			argv[i] = strings.Join(words, " ")
			continue
		}
		if local, ok := o.Images[argv[i]]; ok {
			argv[i] = local
			continue
		}
		argv[i] = m.path(argv[i])
		// --flag=/container/path: the value is a path too.
		if k, v, ok := strings.Cut(argv[i], "="); ok && strings.HasPrefix(k, "-") && strings.HasPrefix(v, "/") {
			argv[i] = k + "=" + m.path(v)
		}
	}
	env = append(append([]string{}, o.Env...), o.ImageEnv[imageRepository(c.Image)]...)
	// envFrom first: the container's own env wins over it, as in the kubelet.
	for _, src := range c.EnvFrom {
		vars, err := b.envFromSource(src)
		if err != nil {
			return nil, nil, "", fmt.Errorf("container %s: envFrom: %w", c.Name, err)
		}
		env = append(env, vars...)
	}
	for _, e := range c.Env {
		if e.ValueFrom != nil {
			v, set, err := b.envFrom(e)
			if err != nil {
				return nil, nil, "", fmt.Errorf("container %s: env %s: %w", c.Name, e.Name, err)
			}
			if set {
				env = append(env, e.Name+"="+v)
			}
			continue
		}
		env = append(env, e.Name+"="+m.path(e.Value))
	}
	if m.covers("/tmp") {
		env = append(env, "TMPDIR="+m.path("/tmp"))
	}
	if o.SocketDirEnv != "" && m.covers(o.SocketDir) {
		env = append(env, o.SocketDirEnv+"="+m.path(o.SocketDir))
	}
	if o.ConfigDirFlag != "" && m.covers(o.ConfigDir) {
		argv = append(argv, o.ConfigDirFlag+"="+m.path(o.ConfigDir))
	}
	dir = filepath.Join(o.Root, "c", c.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, "", err
	}
	return argv, env, dir, nil
}

// isShellScript says whether argv is sh -c SCRIPT.
func isShellScript(argv []string) bool {
	return len(argv) >= 3 && (argv[0] == "sh" || argv[0] == "/bin/sh") && argv[1] == "-c"
}

// mounts maps a container's mount paths to host paths.
type mounts struct {
	byPath map[string]string
	order  []string // longest first
	root   string
}

func (b *BootedPod) mapper(c corev1.Container, root string) (*mounts, error) {
	m := &mounts{byPath: map[string]string{}, root: filepath.Join(root, "c", c.Name, "fs")}
	for _, vm := range c.VolumeMounts {
		dir, ok := b.Volumes[vm.Name]
		if !ok {
			return nil, fmt.Errorf("container %s mounts unknown volume %s", c.Name, vm.Name)
		}
		m.byPath[vm.MountPath] = filepath.Join(dir, vm.SubPath)
		if vm.SubPath != "" && b.isEmptyDir(vm.Name) {
			// The kubelet makes a missing subPath directory in the volume.
			if err := os.MkdirAll(m.byPath[vm.MountPath], 0o777); err != nil {
				return nil, err
			}
		}
		m.order = append(m.order, vm.MountPath)
	}
	sort.Slice(m.order, func(i, j int) bool { return len(m.order[i]) > len(m.order[j]) })
	return m, nil
}

// isEmptyDir reports whether the pod's volume name is an emptyDir.
func (b *BootedPod) isEmptyDir(name string) bool {
	for _, v := range b.pod.Spec.Volumes {
		if v.Name == name {
			return v.EmptyDir != nil
		}
	}
	return false
}

// covers reports whether p is a mount path, lies under one, or holds one.
func (m *mounts) covers(p string) bool {
	for _, mp := range m.order {
		if p == mp || strings.HasPrefix(p, mp+"/") || strings.HasPrefix(mp, p+"/") {
			return true
		}
	}
	return false
}

// path rewrites a container path under a mount to the host path. A directory
// that only holds mounts (e.g. a config dir with a subPath file mount in it) is
// recreated under the container's private root with links to those mounts.
func (m *mounts) path(p string) string {
	if !strings.HasPrefix(p, "/") {
		return p
	}
	for _, mp := range m.order {
		if p == mp {
			return m.byPath[mp]
		}
		if strings.HasPrefix(p, mp+"/") {
			return filepath.Join(m.byPath[mp], strings.TrimPrefix(p, mp+"/"))
		}
	}
	var inside []string
	for _, mp := range m.order {
		if strings.HasPrefix(mp, p+"/") {
			inside = append(inside, mp)
		}
	}
	if len(inside) == 0 {
		return p
	}
	for _, mp := range inside {
		link := filepath.Join(m.root, mp)
		_ = os.MkdirAll(filepath.Dir(link), 0o755)
		_ = os.Symlink(m.byPath[mp], link)
	}
	return filepath.Join(m.root, p)
}

// Project writes the files of every configMap, secret, downwardAPI and
// projected volume that a running container mounts, from the pod and the
// objects it refers to, as the kubelet does at start and
// again whenever they change: the kubelet's "..data" symlink swap
// (servingtest.WriteProjected), so a process watching a file sees the old or
// the new content, never a mix, and only if it looks through the link.
func (b *BootedPod) Project() error {
	for _, v := range b.pod.Spec.Volumes {
		dir := b.Volumes[v.Name]
		var files map[string][]byte
		var err error
		switch {
		case v.EmptyDir != nil || !b.mounted[v.Name]:
			continue
		case v.DownwardAPI != nil:
			files, err = downwardAPIFiles(b.pod, v.DownwardAPI)
		case v.ConfigMap != nil:
			files, err = b.configMapFiles(v.ConfigMap)
		case v.Secret != nil:
			files, err = b.secretFiles(v.Secret)
		case v.Projected != nil:
			files, err = b.projectedFiles(v.Projected)
		default:
			err = fmt.Errorf("only emptyDir, downwardAPI, configMap, secret and projected volumes can be booted locally")
		}
		if err != nil {
			return fmt.Errorf("volume %s: %w", v.Name, err)
		}
		if err := servingtest.WriteProjected(dir, files); err != nil {
			return fmt.Errorf("volume %s: %w", v.Name, err)
		}
	}
	return nil
}

// Update takes the pod as the apiserver now stores it and re-projects its
// volumes, as the kubelet does on its next sync after the pod changed (an
// annotation read by a downwardAPI volume, say). Containers keep running.
func (b *BootedPod) Update(pod *corev1.Pod) error {
	b.pod = pod
	return b.Project()
}

func (b *BootedPod) configMapFiles(v *corev1.ConfigMapVolumeSource) (map[string][]byte, error) {
	return b.objectFiles("configMap", v.Name, v.Optional, v.Items, func(o ObjectSource) (map[string][]byte, bool, error) {
		data, found, err := o.ConfigMapData(b.pod.Namespace, v.Name)
		raw := make(map[string][]byte, len(data))
		for k, val := range data {
			raw[k] = []byte(val)
		}
		return raw, found, err
	})
}

func (b *BootedPod) secretFiles(v *corev1.SecretVolumeSource) (map[string][]byte, error) {
	return b.objectFiles("secret", v.SecretName, v.Optional, v.Items, func(o ObjectSource) (map[string][]byte, bool, error) {
		return o.SecretData(b.pod.Namespace, v.SecretName)
	})
}

// projectedFiles merges a projected volume's sources, as the kubelet does: the
// ServiceAccount admission plugin's kube-api-access-* volume (a token, the
// cluster CA, the namespace) and a catalog token with its audience.
func (b *BootedPod) projectedFiles(v *corev1.ProjectedVolumeSource) (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, src := range v.Sources {
		var files map[string][]byte
		var err error
		switch {
		case src.ConfigMap != nil:
			files, err = b.configMapFiles(&corev1.ConfigMapVolumeSource{LocalObjectReference: src.ConfigMap.LocalObjectReference, Items: src.ConfigMap.Items, Optional: src.ConfigMap.Optional})
		case src.Secret != nil:
			files, err = b.secretFiles(&corev1.SecretVolumeSource{SecretName: src.Secret.Name, Items: src.Secret.Items, Optional: src.Secret.Optional})
		case src.DownwardAPI != nil:
			files, err = downwardAPIFiles(b.pod, &corev1.DownwardAPIVolumeSource{Items: src.DownwardAPI.Items})
		case src.ServiceAccountToken != nil && b.opts.Objects != nil:
			var tok string
			tok, err = b.opts.Objects.PodToken(b.pod, src.ServiceAccountToken)
			files = map[string][]byte{src.ServiceAccountToken.Path: []byte(tok)}
		default:
			err = fmt.Errorf("this projected source cannot be booted locally")
		}
		if err != nil {
			return nil, err
		}
		for k, val := range files {
			out[k] = val
		}
	}
	return out, nil
}

// objectFiles reads a configMap or secret volume's object as the kubelet does:
// a missing object is an error unless the volume is optional (then empty).
func (b *BootedPod) objectFiles(kind, name string, optional *bool, items []corev1.KeyToPath,
	read func(ObjectSource) (map[string][]byte, bool, error)) (map[string][]byte, error) {
	if b.opts.Objects == nil {
		return nil, fmt.Errorf("%s %s: no object source to read it from", kind, name)
	}
	data, found, err := read(b.opts.Objects)
	if err != nil {
		return nil, err
	}
	if !found && (optional == nil || !*optional) {
		return nil, fmt.Errorf("%s %s/%s not found", kind, b.pod.Namespace, name)
	}
	return selectItems(data, items)
}

// selectItems applies a volume's items: only the listed keys, at their paths.
func selectItems(data map[string][]byte, items []corev1.KeyToPath) (map[string][]byte, error) {
	if len(items) == 0 {
		return data, nil
	}
	out := map[string][]byte{}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			continue
		}
		out[it.Path] = v
	}
	return out, nil
}

// envFrom resolves an env valueFrom the way the kubelet does; set is false for
// an optional reference to a missing object or key.
func (b *BootedPod) envFrom(e corev1.EnvVar) (val string, set bool, err error) {
	ref := e.ValueFrom
	switch {
	case ref.FieldRef != nil:
		v, err := fieldValue(b.pod, ref.FieldRef.FieldPath)
		return v, err == nil, err
	case ref.ConfigMapKeyRef != nil && b.opts.Objects != nil:
		r := ref.ConfigMapKeyRef
		data, found, err := b.opts.Objects.ConfigMapData(b.pod.Namespace, r.Name)
		if err != nil {
			return "", false, err
		}
		v, ok := data[r.Key]
		if found && ok {
			return v, true, nil
		}
		if r.Optional != nil && *r.Optional {
			return "", false, nil
		}
		return "", false, fmt.Errorf("configMap %s key %s not found", r.Name, r.Key)
	case ref.SecretKeyRef != nil && b.opts.Objects != nil:
		r := ref.SecretKeyRef
		data, found, err := b.opts.Objects.SecretData(b.pod.Namespace, r.Name)
		if err != nil {
			return "", false, err
		}
		v, ok := data[r.Key]
		if found && ok {
			return string(v), true, nil
		}
		if r.Optional != nil && *r.Optional {
			return "", false, nil
		}
		return "", false, fmt.Errorf("secret %s key %s not found", r.Name, r.Key)
	}
	return "", false, fmt.Errorf("this valueFrom cannot be booted locally")
}

// envFromSource resolves one envFrom entry the way the kubelet does: every
// key of the ConfigMap or Secret, with the prefix, in key order; a missing
// object is an error unless optional. (The kubelet skips keys that are not
// valid variable names with an event; the catalog's keys here all are.)
func (b *BootedPod) envFromSource(src corev1.EnvFromSource) ([]string, error) {
	if b.opts.Objects == nil {
		return nil, fmt.Errorf("no object source to read it from")
	}
	var data map[string]string
	var found bool
	var optional *bool
	var what string
	switch {
	case src.ConfigMapRef != nil:
		var err error
		what, optional = "configMap "+src.ConfigMapRef.Name, src.ConfigMapRef.Optional
		data, found, err = b.opts.Objects.ConfigMapData(b.pod.Namespace, src.ConfigMapRef.Name)
		if err != nil {
			return nil, err
		}
	case src.SecretRef != nil:
		what, optional = "secret "+src.SecretRef.Name, src.SecretRef.Optional
		raw, ok, err := b.opts.Objects.SecretData(b.pod.Namespace, src.SecretRef.Name)
		if err != nil {
			return nil, err
		}
		found, data = ok, map[string]string{}
		for k, v := range raw {
			data[k] = string(v)
		}
	default:
		return nil, fmt.Errorf("neither configMapRef nor secretRef")
	}
	if !found {
		if optional != nil && *optional {
			return nil, nil
		}
		return nil, fmt.Errorf("%s not found in namespace %s", what, b.pod.Namespace)
	}
	names := make([]string, 0, len(data))
	for k := range data {
		names = append(names, k)
	}
	sort.Strings(names)
	out := make([]string, 0, len(names))
	for _, k := range names {
		out = append(out, src.Prefix+k+"="+data[k])
	}
	return out, nil
}

// downwardAPIFiles renders annotation and label items the way the kubelet does.
func downwardAPIFiles(pod *corev1.Pod, v *corev1.DownwardAPIVolumeSource) (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, item := range v.Items {
		if item.FieldRef == nil {
			return nil, fmt.Errorf("item %s: only fieldRef items can be projected locally", item.Path)
		}
		val, err := fieldValue(pod, item.FieldRef.FieldPath)
		if err != nil {
			return nil, fmt.Errorf("item %s: %w", item.Path, err)
		}
		out[item.Path] = []byte(val)
	}
	return out, nil
}

func fieldValue(pod *corev1.Pod, path string) (string, error) {
	for prefix, m := range map[string]map[string]string{
		"metadata.annotations": pod.Annotations, "metadata.labels": pod.Labels,
	} {
		if strings.HasPrefix(path, prefix+"['") && strings.HasSuffix(path, "']") {
			key := strings.TrimSuffix(strings.TrimPrefix(path, prefix+"['"), "']")
			v, ok := m[key]
			if !ok {
				return "", fmt.Errorf("%s is not set on the pod", path)
			}
			return v, nil
		}
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	}
	return "", fmt.Errorf("field %s cannot be projected locally", path)
}
