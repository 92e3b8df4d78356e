package servingtest

import (
	"fmt"
	"io"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Samples are the samples of a Prometheus text exposition, keyed
// name{label="value",...} with labels sorted; histograms give their _bucket,
// _sum and _count samples, summaries their quantiles, _sum and _count.
type Samples map[string]float64

// ParseMetrics reads an exposition with Prometheus's own parser (expfmt), so
// a malformed line is an error instead of a sample that is silently missing.
func ParseMetrics(r io.Reader) (Samples, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	out := Samples{}
	for name, mf := range families {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				out[key(name, labels)] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[key(name, labels)] = m.GetGauge().GetValue()
			case dto.MetricType_UNTYPED:
				out[key(name, labels)] = m.GetUntyped().GetValue()
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				out[key(name+"_sum", labels)] = h.GetSampleSum()
				out[key(name+"_count", labels)] = float64(h.GetSampleCount())
				for _, b := range h.GetBucket() {
					out[key(name+"_bucket", with(labels, "le", fmt.Sprint(b.GetUpperBound())))] = float64(b.GetCumulativeCount())
				}
			case dto.MetricType_SUMMARY:
				s := m.GetSummary()
				out[key(name+"_sum", labels)] = s.GetSampleSum()
				out[key(name+"_count", labels)] = float64(s.GetSampleCount())
				for _, q := range s.GetQuantile() {
					out[key(name, with(labels, "quantile", fmt.Sprint(q.GetQuantile())))] = q.GetValue()
				}
			}
		}
	}
	return out, nil
}

// Sum adds every sample of metric name whose labels include all of labels,
// each given as name=value (unquoted). A label in any other form panics: a
// filter that can never match would read zero and let a test pass unseen.
func (s Samples) Sum(name string, labels ...string) float64 {
	for _, l := range labels {
		if lk, lv, ok := strings.Cut(l, "="); !ok || lk == "" || strings.HasPrefix(lv, `"`) {
			panic(fmt.Sprintf("servingtest: label filter %q: want name=value, the value unquoted", l))
		}
	}
	var total float64
	for k, v := range s {
		if k != name && !strings.HasPrefix(k, name+"{") {
			continue
		}
		ok := true
		for _, l := range labels {
			lk, lv, _ := strings.Cut(l, "=")
			pair := fmt.Sprintf("%s=%q", lk, lv)
			if !strings.Contains(k, "{"+pair) && !strings.Contains(k, ","+pair) {
				ok = false
				break
			}
		}
		if ok {
			total += v
		}
	}
	return total
}

// Has reports whether any sample of metric name exists.
func (s Samples) Has(name string) bool {
	for k := range s {
		if k == name || strings.HasPrefix(k, name+"{") {
			return true
		}
	}
	return false
}

func key(name string, labels map[string]string) string {
	if len(labels) == 0 {
		return name
	}
	names := make([]string, 0, len(labels))
	for n := range labels {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s=%q", n, labels[n])
	}
	return name + "{" + strings.Join(parts, ",") + "}"
}

func with(labels map[string]string, k, v string) map[string]string {
	out := make(map[string]string, len(labels)+1)
	for n, x := range labels {
		out[n] = x
	}
	out[k] = v
	return out
}
