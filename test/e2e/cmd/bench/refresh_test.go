package main

import (
	"slices"
	"testing"
)

// TestRefreshRows: --refresh-rows keeps the named rows and Argo CD's anchor,
// in the suite's order, and refuses a name that is no row.
func TestRefreshRows(t *testing.T) {
	o := options{argo: "argocd", servers: binaries{{"ours", "cmp-server"}}, refreshRows: []string{"ours-mgp", "ours"}}
	var got []string
	for _, c := range refreshConfigs(o) {
		got = append(got, c.name)
	}
	if want := []string{"argo", "ours", "ours-mgp"}; !slices.Equal(got, want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
	if err := checkRefreshRows(o); err != nil {
		t.Fatal(err)
	}
	o.refreshRows = []string{"ours", "ours-rw"}
	if err := checkRefreshRows(o); err == nil {
		t.Fatal("a row that does not exist was accepted")
	}
}
