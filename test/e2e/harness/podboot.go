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
)

// BootOptions say how to run a stored pod's containers as local processes.
type BootOptions struct {
	// Root is a short directory (unix socket paths are limited to 108 bytes).
	Root string
	// Images maps an absolute path inside an image to a local file, e.g. the
	// cmp-server image's /usr/local/bin/cmp-server to a freshly built binary.
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
	Env   []string
	LogTo io.Writer
}

// BootedPod is a pod whose selected init containers ran to completion and whose
// long-running containers are running.
type BootedPod struct {
	Volumes map[string]string // volume name → host directory
	procs   []*Process
	opts    BootOptions
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
	b := &BootedPod{Volumes: map[string]string{}, opts: o}
	for _, v := range pod.Spec.Volumes {
		dir := filepath.Join(o.Root, "v", v.Name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		b.Volumes[v.Name] = dir
		switch {
		case v.EmptyDir != nil:
		case v.DownwardAPI != nil:
			if err := projectDownwardAPI(pod, v.DownwardAPI, dir); err != nil {
				return nil, fmt.Errorf("volume %s: %w", v.Name, err)
			}
		default:
			return nil, fmt.Errorf("volume %s: only emptyDir and downwardAPI volumes can be booted locally", v.Name)
		}
	}
	for _, c := range pod.Spec.InitContainers {
		if !o.Run(c.Name) {
			continue
		}
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			p, err := b.start(c, o)
			if err != nil {
				return nil, err
			}
			b.procs = append(b.procs, p)
			continue
		}
		p, err := b.start(c, o)
		if err != nil {
			return nil, err
		}
		if err := p.Wait(60 * time.Second); err != nil {
			return nil, fmt.Errorf("init container %s: %v\n%s", c.Name, err, p.Output())
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
	argv, env, dir, err := b.command(c, append(append([]string{}, c.Command...), c.Args...), o)
	if err != nil {
		return nil, err
	}
	return Start(c.Name, argv, env, dir, o.LogTo)
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
	image := argv[0]
	for i := range argv {
		argv[i] = m.path(argv[i])
	}
	if local, ok := o.Images[image]; ok {
		argv[0] = local
	}
	env = append([]string{}, o.Env...)
	for _, e := range c.Env {
		if e.ValueFrom != nil {
			return nil, nil, "", fmt.Errorf("container %s: env %s uses valueFrom, which cannot be booted locally", c.Name, e.Name)
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
		m.order = append(m.order, vm.MountPath)
	}
	sort.Slice(m.order, func(i, j int) bool { return len(m.order[i]) > len(m.order[j]) })
	return m, nil
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

// projectDownwardAPI writes annotation and label items the way the kubelet does.
func projectDownwardAPI(pod *corev1.Pod, v *corev1.DownwardAPIVolumeSource, dir string) error {
	for _, item := range v.Items {
		if item.FieldRef == nil {
			return fmt.Errorf("item %s: only fieldRef items can be projected locally", item.Path)
		}
		val, err := fieldValue(pod, item.FieldRef.FieldPath)
		if err != nil {
			return fmt.Errorf("item %s: %w", item.Path, err)
		}
		p := filepath.Join(dir, item.Path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(val), 0o644); err != nil {
			return err
		}
	}
	return nil
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
