package main

import (
	"strings"
	"testing"
)

// Each pass line compares the right figures: our rest ms with floor-go's of
// the same scenario (limit by scenario), our RSS with Argo CD's, and on the
// monorepo the read-only server's CPU with Argo CD's.
func TestGoalsFromCMP(t *testing.T) {
	o := options{servers: binaries{{"ours", "/bin/true"}}, chunk: 262144, exclude: ".git/*"}
	single := []result{
		{server: "argo", scenario: "stock", afterMs: 900, rssMiB: 100},
		{server: "ours", scenario: "stock", afterMs: 520, rssMiB: 25},
		{server: "floor-go", scenario: "stock", afterMs: 420, floor: true},
		{server: "argo", scenario: "tuned", afterMs: 700, rssMiB: 100},
		{server: "ours", scenario: "tuned", afterMs: 470, rssMiB: 35},
		{server: "floor-go", scenario: "tuned", afterMs: 400, floor: true},
	}
	mono := []result{
		{server: "argo", scenario: "stock", cpuMsPerReq: 4000},
		{server: "ours-ro", scenario: "stock", cpuMsPerReq: 800},
		{server: "argo", scenario: "tuned", cpuMsPerReq: 2000},
		{server: "ours-ro", scenario: "tuned", cpuMsPerReq: 700},
	}
	var g goals
	g.fromCMP(o, "5000 files", false, single)
	g.fromCMP(o, "monorepo", true, mono)
	g.add("webhook ours, 50-container pod", 1.6, 1, webhookP99OverFloor)
	want := []struct {
		prefix string
		pass   bool
	}{
		{"5000 files, stock, ours: rest 520 ms over floor-go's 420 ms", true},  // 1.24 ≤ 1.3
		{"5000 files, stock, ours: RSS 25 MiB", true},                          // 0.25
		{"5000 files, tuned, ours: rest 470 ms over floor-go's 400 ms", false}, // 1.175 > 1.15
		{"5000 files, tuned, ours: RSS 35 MiB", false},                         // 0.35
		{"monorepo, stock, readOnlyRepository: sidecar CPU 800 ms", true},      // 0.2
		{"monorepo, tuned, readOnlyRepository: sidecar CPU 700 ms", false},     // 0.35
		{"webhook ours", false},
	}
	if len(g.list) != len(want) {
		t.Fatalf("%d lines, want %d: %+v", len(g.list), len(want), g.list)
	}
	for i, w := range want {
		got := g.list[i]
		if !strings.HasPrefix(got.what, w.prefix) || (got.ratio <= got.limit) != w.pass {
			t.Errorf("line %d: %q %.3f ≤ %.2f, want %q pass=%v", i, got.what, got.ratio, got.limit, w.prefix, w.pass)
		}
	}
}
