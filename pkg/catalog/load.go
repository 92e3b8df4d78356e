package catalog

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/pkg/pluginconfig"
)

// Load reads and validates a catalog file.
func Load(path string) (*Catalog, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(data)
}

// Parse decodes a catalog strictly (unknown and duplicate keys are errors) and
// validates it. Every problem is reported in one *validationError.
// defaults.nativeSidecars: auto becomes native sidecars (ParseWith asks a
// cluster).
func Parse(data []byte) (*Catalog, error) {
	return ParseWith(data, Options{})
}

// ParseWith is Parse with o's resolvers. A resolver is asked only once the
// rest of the catalog is valid: an invalid catalog costs no API call.
func ParseWith(data []byte, o Options) (*Catalog, error) {
	// An env var named N or on is the text, not a YAML 1.1 boolean, and so
	// is a parameter named N of an inline plugin.yaml.
	js, err := yaml.YAMLToJSONStrict(pluginconfig.QuoteYAML11Words(data, reflect.TypeOf(catalogFile{}), reflect.TypeOf(pluginconfig.Plugin{})))
	if err != nil {
		return nil, &validationError{Problems: []string{yamlProblem(err)}}
	}
	var f catalogFile
	var p problems
	strictErrs, err := sigsjson.UnmarshalStrict(js, &f, sigsjson.DisallowUnknownFields, sigsjson.DisallowDuplicateFields)
	if err != nil {
		return nil, &validationError{Problems: []string{"decode: " + err.Error()}}
	}
	for _, se := range strictErrs {
		p = append(p, se.Error())
	}
	c := build(&p, &f)
	if len(p) > 0 {
		return nil, &validationError{Problems: p}
	}
	if err := resolveNativeSidecars(&f.Defaults, &c.Defaults, o); err != nil {
		return nil, err
	}
	c.Revision = f.Revision
	if c.Revision == "" {
		sum := sha256.Sum256(data)
		c.Revision = hex.EncodeToString(sum[:])[:12]
	}
	return c, nil
}

// yamlProblem says "yaml: line N: ..." once: the library's message may carry
// the prefix already, or wrap it.
func yamlProblem(err error) string {
	msg := strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")
	if !strings.HasPrefix(msg, "yaml: ") {
		msg = "yaml: " + msg
	}
	return msg
}

func build(p *problems, f *catalogFile) *Catalog {
	validateHeader(p, f)
	validateDefaults(p, &f.Defaults)
	names := slices.Sorted(maps.Keys(f.Plugins))
	c := &Catalog{
		Plugins:    make(map[string]*Entry, len(f.Plugins)),
		Names:      names,
		namespaces: f.Namespaces,
		Defaults:   resolveDefaults(&f.Defaults),
	}
	for _, name := range names {
		pl := f.Plugins[name]
		validatePluginName(p, name)
		validatePlugin(p, name, pl)
		if pl == nil {
			continue
		}
		e := &Entry{Name: name, Plugin: *pl}
		if len(pl.Config.Inline) > 0 && string(pl.Config.Inline) != "null" {
			inlineConfig(p, "plugins."+name+".config.inline", e)
		}
		if pl.Config.ConfigMap != nil && pl.Config.ConfigMap.Key == "" {
			e.Config.ConfigMap = &ConfigMapRef{Name: pl.Config.ConfigMap.Name, Key: keys.PluginConfigFile}
		}
		c.Plugins[name] = e
		if e.Parsed != nil {
			if n := e.Parsed.VersionNotice(); n != "" {
				c.Warnings = append(c.Warnings, "plugins."+name+".config: "+n)
			}
		}
		if e.GitCredentials && e.Parsed != nil && !e.Parsed.Spec.ProvideGitCreds {
			c.Warnings = append(c.Warnings, fmt.Sprintf(
				"plugins.%s.gitCredentials is true, but its config does not set spec.provideGitCreds: the repo-server sends it no credentials", name))
		}
		if len(pl.AllowedImages) > 0 {
			if ok, err := ImageAllowed(pl.Image, pl.AllowedImages); err == nil && !ok {
				c.Warnings = append(c.Warnings, fmt.Sprintf(
					"plugins.%s.image %q does not match its own allowedImages (%s): a pod cannot ask for that image back by annotation",
					name, pl.Image, strings.Join(pl.AllowedImages, ", ")))
			}
		}
	}
	validateTmp(p, c, &f.Defaults, f.Plugins, names)
	validateSockets(p, c.Plugins, names)
	validatePodVolumeNames(p, f.Plugins, names)
	validateNamespaces(p, f.Namespaces, f.Plugins, names)
	return c
}

// inlineConfig renders the inline config to the YAML the sidecar will read and
// validates it as a plugin.yaml.
func inlineConfig(p *problems, field string, e *Entry) {
	y, err := yaml.JSONToYAML(e.Config.Inline)
	if err != nil {
		p.addf(field, "%v", err)
		return
	}
	parsed, err := parsePluginConfig(y)
	if err != nil {
		p.addf(field, "%v", err)
		return
	}
	e.Parsed = parsed
	if parsed.Spec.ProvideGitCreds && !e.GitCredentials {
		// Argo CD would hand the plugin the credentials of every repository
		// the repo-server clones for it: that is the admin's decision, said
		// on the entry, where explain and doctor show it.
		p.addf(field, "sets spec.provideGitCreds: true, which gives the plugin the git credentials of every repository the repo-server clones for it; "+
			"add gitCredentials: true to plugins.%s to allow it (its sidecar alone then shares the repo-server's askpass socket)", e.Name)
	}
	if y, err = withTenancy(e, y); err != nil {
		p.addf(field, "%v", err)
		e.Parsed = nil
		return
	}
	e.InlineYAML = string(y)
	e.Socket = socketName(parsed)
}

func resolveDefaults(d *Defaults) ResolvedDefaults {
	r := ResolvedDefaults{
		NativeSidecars:      d.NativeSidecars != NativeSidecarsOff,
		CopyImage:           d.CopyImage,
		CopyImagePullPolicy: d.CopyImagePullPolicy,
		RunAsUser:           keys.DefaultArgoCDUID,
	}
	r.RepoServerEnv = repoServerEnv(d.RepoServer)
	r.RepoServerNames, r.RepoServerPrograms = d.RepoServerContainer.resolved()
	if d.RunAsUserPolicy == runAsUserAssigned {
		r.RunAsUser = 0
	} else if d.RunAsUser != nil {
		r.RunAsUser = *d.RunAsUser
	}
	r.TmpSizeLimit = d.TmpSizeLimit
	r.TmpMedium = tmpMedium(d.TmpMedium)
	if d.Resources != nil {
		r.Resources = *d.Resources
	} else {
		r.Resources = corev1.ResourceRequirements{
			Requests: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("50m"),
				corev1.ResourceMemory: resource.MustParse("64Mi"),
			},
		}
	}
	return r
}

// Enabled lists the plugins a namespace may use: its own list plus the "*" list.
func (c *Catalog) Enabled(namespace string) []string {
	own, all := c.namespaces[namespace], c.namespaces[AllNamespaces]
	if len(all) == 0 {
		return own
	}
	out := append(append([]string(nil), own...), all...)
	return dedupe(out)
}

// HasNamespace reports whether the catalog names namespace itself (not only
// through "*").
func (c *Catalog) HasNamespace(namespace string) bool {
	_, ok := c.namespaces[namespace]
	return ok
}

// Namespaces lists the namespace keys of the catalog, "*" included, sorted.
func (c *Catalog) Namespaces() []string {
	return slices.Sorted(maps.Keys(c.namespaces))
}

// IsEnabled reports whether plugin may be injected in namespace.
func (c *Catalog) IsEnabled(namespace, plugin string) bool {
	for _, n := range c.namespaces[namespace] {
		if n == plugin {
			return true
		}
	}
	for _, n := range c.namespaces[AllNamespaces] {
		if n == plugin {
			return true
		}
	}
	return false
}

// ResourcesFor returns the plugin's resources, or the catalog default.
func (c *Catalog) ResourcesFor(e *Entry) corev1.ResourceRequirements {
	if e.Resources != nil {
		return *e.Resources.DeepCopy()
	}
	return *c.Defaults.Resources.DeepCopy()
}

func dedupe(in []string) []string {
	seen := make(map[string]bool, len(in))
	out := in[:0]
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// DefaultRepoServerEnv is what the injector sets on the repo-server when the
// catalog leaves defaults.repoServer unset.
func DefaultRepoServerEnv() []corev1.EnvVar { return repoServerEnv(nil) }

// repoServerEnv resolves the RepoServer settings into env vars (a zero chunk
// size or an empty exclusion list: no variable).
func repoServerEnv(rs *RepoServer) []corev1.EnvVar {
	chunk, exclusions := DefaultCMPChunkSize, DefaultPluginTarExclusions
	if rs != nil && rs.CMPChunkSize != nil {
		chunk = *rs.CMPChunkSize
	}
	if rs != nil && rs.PluginTarExclusions != nil {
		exclusions = *rs.PluginTarExclusions
	}
	var env []corev1.EnvVar
	if chunk > 0 {
		env = append(env, corev1.EnvVar{Name: keys.EnvCMPChunkSize, Value: strconv.Itoa(chunk)})
	}
	if len(exclusions) > 0 {
		env = append(env, corev1.EnvVar{Name: keys.EnvPluginTarExclusions, Value: strings.Join(exclusions, ";")})
	}
	if rs != nil && rs.PluginUseManifestGeneratePaths {
		env = append(env, corev1.EnvVar{Name: keys.EnvPluginUseManifestGeneratePaths, Value: "true"})
	}
	return env
}
