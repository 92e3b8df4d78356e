package pluginconfig

import "fmt"

// Argo CD 4.0 drops spec.version (argo-cd PR #28362, open on 2026-11-28 and in
// no release yet): its plugin server refuses to start with a plugin.yaml that
// sets it, and names every socket <metadata.name>.sock. Every release so far
// names it <metadata.name>-<spec.version>.sock. Folding the version into the
// name keeps that socket name, so Applications naming the plugin work with
// both, and cmp-server serves such a plugin.yaml as every released Argo CD
// does.

// VersionNotice says how to drop spec.version before Argo CD 4.0, or "" when
// the plugin does not set it (or is nil).
func (p *Plugin) VersionNotice() string {
	if p == nil || p.Spec.Version == "" {
		return ""
	}
	renamed := p.WithoutVersion()
	return fmt.Sprintf("spec.version %q is removed in Argo CD 4.0, whose plugin server refuses to start with it: "+
		"set metadata.name: %s and remove spec.version; the socket stays %s, so Applications that name the plugin %q keep working with every Argo CD release",
		p.Spec.Version, renamed.Metadata.Name, renamed.SocketName(), renamed.Metadata.Name)
}

// WithoutVersion is p with its version folded into its name: the same
// socket, without spec.version.
func (p *Plugin) WithoutVersion() *Plugin {
	q := *p
	if q.Spec.Version != "" {
		q.Metadata.Name += "-" + q.Spec.Version
		q.Spec.Version = ""
	}
	return &q
}
