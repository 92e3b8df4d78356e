// Package pluginconfig is the ConfigManagementPlugin file (plugin.yaml) that both the
// plugin server and the injector's catalog use.
package pluginconfig

import (
	"github.com/cmp-injector/cmp-injector/pkg/params"
	"github.com/cmp-injector/cmp-injector/pkg/tenancy"
)

// Kind is the only accepted value of the kind field.
const Kind = "ConfigManagementPlugin"

// Plugin is a whole plugin.yaml document.
type Plugin struct {
	APIVersion string   `json:"apiVersion,omitempty"`
	Kind       string   `json:"kind"`
	Metadata   Metadata `json:"metadata"`
	Spec       Spec     `json:"spec"`
}

// Metadata names the plugin; the name is part of its socket file name.
type Metadata struct {
	Name string `json:"name"`
}

// Spec is the behaviour of a plugin.
type Spec struct {
	// Version, when set, becomes part of the socket name: <name>-<version>.sock.
	Version    string      `json:"version,omitempty"`
	Init       *Command    `json:"init,omitempty"`
	Generate   Command     `json:"generate"`
	Discover   *Discover   `json:"discover,omitempty"`
	Parameters *Parameters `json:"parameters,omitempty"`
	// PreserveFileMode keeps the tarball's file modes on extraction.
	PreserveFileMode bool `json:"preserveFileMode,omitempty"`
	// ProvideGitCreds asks the repo-server to send git credentials in the env.
	ProvideGitCreds bool `json:"provideGitCreds,omitempty"`
	// AllowConcurrency, when explicitly false, serialises generation for this
	// plugin. Argo CD ignores the key; we honour it (CMP v2 proposal).
	AllowConcurrency *bool `json:"allowConcurrency,omitempty"`
	// ReadOnlyRepository declares that no command writes into the repository
	// (only to /tmp or stdout): requests sending the same repository stream
	// then share one read-only unpacked tree (cmp-server's trees.go). Argo CD
	// has no such key and ignores it.
	ReadOnlyRepository bool `json:"readOnlyRepository,omitempty"`
	// Rules (spec.allowedProjects, spec.allowedSourceRepos) limit which Argo
	// CD projects and repositories the plugin serves; cmp-server refuses the
	// others (tenancy.go). The injector writes them from the catalog. Argo
	// CD has no such keys and ignores them.
	tenancy.Rules
}

// Command is an argv: Command followed by Args, executed without a shell.
type Command struct {
	Command []string `json:"command,omitempty"`
	Args    []string `json:"args,omitempty"`
}

// Discover holds the discovery rules; only the first one set is evaluated.
type Discover struct {
	FileName string `json:"fileName,omitempty"`
	Find     *Find  `json:"find,omitempty"`
}

// Find is discovery by glob (with **) or by a command that prints something.
type Find struct {
	Command
	Glob string `json:"glob,omitempty"`
}

// Parameters are the plugin's parameter announcements.
type Parameters struct {
	Static  []params.Announcement `json:"static,omitempty"`
	Dynamic *Command              `json:"dynamic,omitempty"`
}
