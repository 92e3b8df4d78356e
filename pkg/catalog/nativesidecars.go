package catalog

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// NativeSidecarsSetting is defaults.nativeSidecars as the admin wrote it:
// true, false, or "auto". Booleans and their strings both decode, so a
// catalog written before "auto" existed loads unchanged.
type NativeSidecarsSetting string

// The settings. Unset means NativeSidecarsOn, as before "auto" existed.
const (
	NativeSidecarsOn  NativeSidecarsSetting = "true"
	NativeSidecarsOff NativeSidecarsSetting = "false"
	// NativeSidecarsAuto: whoever talks to the cluster asks its API server
	// (Options.NativeSidecars): a Kubernetes version says too little, since
	// v1.28 has native sidecars only with the SidecarContainers feature gate
	// on and a distribution may turn it off on later releases.
	NativeSidecarsAuto NativeSidecarsSetting = "auto"
)

// UnmarshalJSON takes true, false, "true", "false" or "auto".
func (n *NativeSidecarsSetting) UnmarshalJSON(b []byte) error {
	switch string(bytes.TrimSpace(b)) {
	case "true", `"true"`:
		*n = NativeSidecarsOn
	case "false", `"false"`:
		*n = NativeSidecarsOff
	case `"auto"`:
		*n = NativeSidecarsAuto
	case "null":
		*n = ""
	default:
		return fmt.Errorf("defaults.nativeSidecars must be true, false or \"auto\", got %s", b)
	}
	return nil
}

// MarshalJSON writes true and false as booleans (what catalogs written before
// "auto" hold) and auto as the string.
func (n NativeSidecarsSetting) MarshalJSON() ([]byte, error) {
	switch n {
	case NativeSidecarsOn:
		return []byte("true"), nil
	case NativeSidecarsOff:
		return []byte("false"), nil
	}
	return json.Marshal(string(n))
}

// NativeSidecarsResolver decides defaults.nativeSidecars: auto by asking the
// cluster (a transport's I/O; the catalog does none). image is the catalog's
// copy image, for a probe pod an image policy admits. It returns the decision
// and what the API server said, or an error when its answer does not decide
// (no permission, no answer): the catalog is then not loaded, since either
// guess can be wrong in a way no one sees until pods are refused or lose
// their start order.
type NativeSidecarsResolver func(image string) (native bool, reason string, err error)

// Options say how Parse settles what depends on the cluster.
type Options struct {
	// NativeSidecars resolves defaults.nativeSidecars: auto. Nil (the offline
	// commands, which have no cluster): native sidecars, the default of a
	// catalog that says nothing, with NativeSidecarsReason saying so.
	NativeSidecars NativeSidecarsResolver
}

// offlineAutoReason is NativeSidecarsReason when auto was resolved without a
// cluster.
const offlineAutoReason = "defaults.nativeSidecars is auto and no API server was asked: native sidecars, as for a catalog that does not set it " +
	"(the injector asks its API server at start-up; set true or false to render for a cluster without asking)"

// unresolvedError is Parse's error when a resolver could not decide: the
// catalog is valid, the cluster did not answer. Unlike a validation error it
// may clear without an edit, so the Watcher tries the same content again at
// its next Reload.
type unresolvedError struct{ Err error }

func (e *unresolvedError) Error() string { return "defaults.nativeSidecars: auto: " + e.Err.Error() }
func (e *unresolvedError) Unwrap() error { return e.Err }

// resolveNativeSidecars applies the setting to r.
func resolveNativeSidecars(d *Defaults, r *ResolvedDefaults, o Options) error {
	switch d.NativeSidecars {
	case "", NativeSidecarsOn:
		r.NativeSidecars = true
	case NativeSidecarsOff:
		r.NativeSidecars = false
	case NativeSidecarsAuto:
		r.NativeSidecarsAuto = true
		if o.NativeSidecars == nil {
			r.NativeSidecars, r.NativeSidecarsReason = true, offlineAutoReason
			return nil
		}
		native, reason, err := o.NativeSidecars(d.CopyImage)
		if err != nil {
			return &unresolvedError{Err: err}
		}
		r.NativeSidecars, r.NativeSidecarsReason = native, reason
	}
	return nil
}
