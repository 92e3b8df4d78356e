package servingtest

import (
	"strings"
	"testing"
)

func TestSumFiltersByLabels(t *testing.T) {
	s, err := ParseMetrics(strings.NewReader(`# TYPE reloads_total counter
reloads_total{kind="a",result="ok"} 2
reloads_total{kind="b",result="ok"} 3
reloads_total{kind="a",result="invalid"} 5
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		labels []string
		want   float64
	}{
		{nil, 10}, {[]string{"result=ok"}, 5}, {[]string{"result=ok", "kind=b"}, 3}, {[]string{"result=missing"}, 0},
	} {
		if got := s.Sum("reloads_total", tc.labels...); got != tc.want {
			t.Errorf("Sum(%v) = %v, want %v", tc.labels, got, tc.want)
		}
	}
}

// A quoted value (the text format's spelling) would never match: Sum refuses
// it rather than read zero.
func TestSumRefusesFiltersThatCannotMatch(t *testing.T) {
	for _, l := range []string{`result="ok"`, "result", "=ok"} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(r.(string), "want name=value") {
					t.Errorf("Sum with label %q: recovered %v, want a panic naming the form", l, r)
				}
			}()
			Samples{}.Sum("x", l)
		}()
	}
}
