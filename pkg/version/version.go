// Package version carries the release version stamped in at link time, so that both
// binaries and the status annotation report the same thing.
package version

// Version is set with -ldflags "-X github.com/cmp-injector/cmp-injector/pkg/version.Version=v1.2.3".
var Version = "dev"
