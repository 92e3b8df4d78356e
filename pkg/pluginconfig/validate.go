package pluginconfig

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cmp-injector/cmp-injector/pkg/params"
)

// Validate checks everything the server relies on and returns one error that names
// every bad field, so that an operator fixes the file in one round.
func (p *Plugin) Validate() error {
	var problems []string
	bad := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }

	if p.Kind != Kind {
		bad("kind should be %s, found %q", Kind, p.Kind)
	}
	if p.Metadata.Name == "" {
		bad("metadata.name should be non-empty")
	} else if msg := fileNamePart(p.Metadata.Name); msg != "" {
		bad("metadata.name %q %s", p.Metadata.Name, msg)
	}
	if msg := fileNamePart(p.Spec.Version); p.Spec.Version != "" && msg != "" {
		bad("spec.version %q %s", p.Spec.Version, msg)
	}
	if len(p.Spec.Generate.Command) == 0 {
		bad("spec.generate.command should be non-empty")
	} else if p.Spec.Generate.Command[0] == "" {
		bad("spec.generate.command[0] should be non-empty")
	}
	checkOptionalCommand(p.Spec.Init, "spec.init", bad)
	if d := p.Spec.Discover; d != nil && d.Find != nil {
		checkOptionalCommand(&d.Find.Command, "spec.discover.find", bad)
	}
	if ps := p.Spec.Parameters; ps != nil {
		checkOptionalCommand(ps.Dynamic, "spec.parameters.dynamic", bad)
		for i, a := range ps.Static {
			if err := params.ValidateAnnouncement(a); err != nil {
				bad("spec.parameters.static[%d]: %v", i, err)
			}
		}
	}
	for _, pr := range p.Spec.Rules.Validate() {
		bad("spec.%s", pr)
	}
	if len(problems) == 0 {
		return nil
	}
	return errors.New("invalid plugin configuration: " + strings.Join(problems, "; "))
}

// checkOptionalCommand rejects a command block that has args (or an empty argv[0])
// but nothing to run: Argo CD would silently skip it.
func checkOptionalCommand(c *Command, field string, bad func(string, ...any)) {
	if c == nil {
		return
	}
	if len(c.Command) == 0 && len(c.Args) > 0 {
		bad("%s.args is set but %s.command is empty", field, field)
	}
	if len(c.Command) > 0 && c.Command[0] == "" {
		bad("%s.command[0] should be non-empty", field)
	}
}

// fileNamePart explains why s cannot be part of a socket file name, or returns "".
func fileNamePart(s string) string {
	switch {
	case s == "." || s == "..":
		return "cannot be . or .."
	case strings.ContainsAny(s, "/\x00"):
		return "must not contain / or NUL (it is part of the socket file name)"
	}
	return ""
}

// SocketName is the plugin's socket file name, <name>[-<version>].sock; the
// repo-server dials it by the Application's spec.source.plugin.name.
func (p *Plugin) SocketName() string {
	if p.Spec.Version != "" {
		return p.Metadata.Name + "-" + p.Spec.Version + ".sock"
	}
	return p.Metadata.Name + ".sock"
}

// DiscoveryConfigured reports whether any discovery rule is set (Argo CD's
// isDiscoveryConfigured).
func (p *Plugin) DiscoveryConfigured() bool {
	d := p.Spec.Discover
	if d == nil {
		return false
	}
	return d.FileName != "" || (d.Find != nil && (d.Find.Glob != "" || len(d.Find.Command.Command) > 0))
}

// DiscoveryReadsNamesOnly reports whether the discovery rule evaluated (the
// first one set, as Argo CD evaluates it) reads only the tree's names:
// fileName or find.glob, not find.command.
func (p *Plugin) DiscoveryReadsNamesOnly() bool {
	d := p.Spec.Discover
	return d != nil && (d.FileName != "" || (d.Find != nil && d.Find.Glob != ""))
}

// Concurrent reports whether generation may run in parallel; only an explicit
// allowConcurrency: false serialises it.
func (p *Plugin) Concurrent() bool {
	return p.Spec.AllowConcurrency == nil || *p.Spec.AllowConcurrency
}
