package kustomizeplugin

import (
	"reflect"
	"strings"
	"testing"

	"github.com/cmp-injector/cmp-injector/pkg/params"
)

func str(s string) *string { return &s }

func TestNewPlan(t *testing.T) {
	p, warnings, err := newPlan([]params.AppParameter{
		{Name: "images", Array: []string{"nginx=r.example/nginx:1.27", "--load-restrictor=none"}},
		{Name: "name-suffix", String: str("-s")},
		{Name: "name-prefix", String: str("--p")},
		{Name: "version", String: str("v5.8.2")},
		{Name: "extra", String: str("x")},
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	want := plan{version: "v5.8.2", edits: []edit{
		{paramNamePrefix, []string{"edit", "set", "nameprefix", "--", "--p"}},
		{paramNameSuffix, []string{"edit", "set", "namesuffix", "--", "-s"}},
		{paramImages, []string{"edit", "set", "image", "--", "nginx=r.example/nginx:1.27"}},
		{paramImages, []string{"edit", "set", "image", "--", "--load-restrictor=none"}},
	}, build: []string{"build", "."}}
	if !reflect.DeepEqual(p, want) {
		t.Errorf("plan %+v\nwant %+v", p, want)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], `unknown parameter "extra" ignored`) {
		t.Errorf("warnings %q", warnings)
	}

	p, _, err = newPlan([]params.AppParameter{{Name: "name-prefix"}, {Name: "name-suffix", String: str("")}, {Name: "version", String: str("")}}, true)
	if err != nil || len(p.edits) != 0 || p.version != "" || !reflect.DeepEqual(p.build, []string{"build", "--enable-helm", "--helm-command", "helm", "."}) {
		t.Errorf("empty values: plan %+v err %v, want no edit and the helm build", p, err)
	}
}

func TestNewPlanRefuses(t *testing.T) {
	for _, tc := range []struct {
		p    params.AppParameter
		want string
	}{
		{params.AppParameter{Name: "version", String: str("../sh")}, "parameter version: only letters, digits and . + - are allowed"},
		{params.AppParameter{Name: "version", Array: []string{"v5"}}, "parameter version: want a string"},
		{params.AppParameter{Name: "name-prefix", Map: map[string]string{"a": "b"}}, "parameter name-prefix: want a string"},
		{params.AppParameter{Name: "name-suffix", String: str("a\x00b")}, "parameter name-suffix: holds a NUL byte"},
		{params.AppParameter{Name: "images", String: str("nginx")}, "parameter images: want an array"},
		{params.AppParameter{Name: "images", Array: []string{"a", ""}}, "parameter images: entry 1 is empty"},
		{params.AppParameter{Name: "images", Array: []string{"a\x00"}}, "parameter images entry 0: holds a NUL byte"},
	} {
		if _, _, err := newPlan([]params.AppParameter{tc.p}, false); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err %v, want %q", tc.p, err, tc.want)
		}
	}
}
