package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"
)

// Results is what a matrix run found, committed as docs/compatibility.json so
// the tables in docs/compatibility.md and README's Compatibility block are
// generated from it (render.go) and a test keeps them equal.
type Results struct {
	Commit  string `json:"commit"`  // the tested tree
	Machine string `json:"machine"` // e.g. "2 cores, linux/amd64, go1.26.8"
	Started string `json:"started"` // RFC 3339
	// WallSeconds is the time of the whole run, builds included, summed over
	// resumed runs.
	WallSeconds float64 `json:"wallSeconds"`
	// AnchorKube and AnchorArgo are the pinned releases the other axis runs with.
	AnchorKube string   `json:"anchorKube"`
	AnchorArgo []string `json:"anchorArgo"`
	Etcd       string   `json:"etcd"`
	Kube       []Row    `json:"kubernetes"`
	Argo       []Row    `json:"argocd"`
	// PlannedKube and PlannedArgo are the releases hack/versions.sh lists:
	// the documents show the ones without a row as not run yet.
	PlannedKube []string `json:"plannedKubernetes"`
	PlannedArgo []string `json:"plannedArgocd"`
}

// Row is one release: its build and each scenario (an end-to-end test).
type Row struct {
	Version      string  `json:"version"`
	Commit       string  `json:"commit"` // the tree this row ran (a resumed run can span commits)
	Build        string  `json:"build"`  // "ok", "cached" or "failed"
	BuildReason  string  `json:"buildReason,omitempty"`
	BuildSeconds float64 `json:"buildSeconds"`
	// Source says what a release built from source was built from ("":
	// the Go module proxy).
	Source      string     `json:"source,omitempty"`
	Scenarios   []Scenario `json:"scenarios,omitempty"`
	TestSeconds float64    `json:"testSeconds"`
}

// Scenario is one top-level end-to-end test's result.
type Scenario struct {
	Name    string  `json:"name"`
	Result  string  `json:"result"` // pass, fail, skip
	Seconds float64 `json:"seconds"`
	// Reason is the first failure line a failing test printed.
	Reason string `json:"reason,omitempty"`
}

// Done reports whether the row ran to the end (a build that failed is an end).
func (r Row) Done() bool { return r.Build == "failed" || len(r.Scenarios) > 0 }

// Passed reports whether every scenario passed.
func (r Row) Passed() bool {
	if r.Build == "failed" || len(r.Scenarios) == 0 {
		return false
	}
	for _, s := range r.Scenarios {
		if s.Result == "fail" {
			return false
		}
	}
	return true
}

func loadResults(path string) (*Results, error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return &Results{}, nil
	}
	if err != nil {
		return nil, err
	}
	var r Results
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}

func (r *Results) save(path string) error {
	sortRows(r.Kube)
	sortRows(r.Argo)
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// put replaces the row of the same version or adds it.
func put(rows []Row, row Row) []Row {
	for i := range rows {
		if rows[i].Version == row.Version {
			rows[i] = row
			return rows
		}
	}
	return append(rows, row)
}

func find(rows []Row, version string) (Row, bool) {
	for _, r := range rows {
		if r.Version == version {
			return r, true
		}
	}
	return Row{}, false
}

// sortRows orders rows newest first, by version number.
func sortRows(rows []Row) {
	sort.Slice(rows, func(i, j int) bool { return versionLess(rows[j].Version, rows[i].Version) })
}

func versionLess(a, b string) bool {
	pa, pb := versionParts(a), versionParts(b)
	for i := range pa {
		if pa[i] != pb[i] {
			return pa[i] < pb[i]
		}
	}
	// A release's cell with feature gates (v1.28.15+SidecarContainers=true)
	// sorts beside the plain one, in a fixed order.
	return a < b
}

func versionParts(v string) [3]int {
	var p [3]int
	_, _ = fmt.Sscanf(strings.TrimPrefix(v, "v"), "%d.%d.%d", &p[0], &p[1], &p[2])
	return p
}

// minor is "1.33" of "v1.33.13".
func minor(v string) string {
	p := versionParts(v)
	return fmt.Sprintf("%d.%d", p[0], p[1])
}

func seconds(d time.Duration) float64 { return d.Round(100 * time.Millisecond).Seconds() }
