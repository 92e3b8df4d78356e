package sidecarprobe

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// v127Refusal is what v1.27 answers (it has no restartPolicy on containers
// and refuses an init container's lifecycle): the error text the version
// matrix recorded from v1.27.16 ("initContainers[N].lifecycle: Forbidden: may
// not be set for init containers"), in the Status shape of the recorded v1.32
// answer. No v1.27 kube-apiserver is built here to record it whole.
const v127Refusal = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
"message":"Pod \"cmp-injector-native-sidecars-probe-x\" is invalid: spec.initContainers[0].lifecycle: Forbidden: may not be set for init containers",
"reason":"Invalid","details":{"name":"cmp-injector-native-sidecars-probe-x","kind":"Pod","causes":[{"reason":"FieldValueForbidden",
"message":"Forbidden: may not be set for init containers","field":"spec.initContainers[0].lifecycle"}]},"code":422}`

// rbacRefusal is RBAC's answer to a user without create on pods.
const rbacRefusal = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
"message":"pods is forbidden: User \"system:serviceaccount:cmp-injector:cmp-injector\" cannot create resource \"pods\" in API group \"\" in the namespace \"cmp-injector\"",
"reason":"Forbidden","details":{"kind":"pods"},"code":403}`

// Probe through client-go against API server answers as they come over the
// wire: testdata holds kube-apiserver v1.32.13's own answers to the probe pod,
// with --feature-gates=SidecarContainers=false (422) and without (201),
// recorded by a dry-run POST of probePod (managedFields dropped).
func TestProbeReplaysAPIServerAnswers(t *testing.T) {
	file := func(name string) string {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, c := range []struct {
		name, body string
		code       int
		native     bool
		undecided  bool
		says       string
	}{
		{"v1.32.13", file("v1.32.13.201.json"), 201, true, false, "accepts"},
		{"v1.32.13, SidecarContainers=false", file("v1.32.13-gate-off.422.json"), 422, false, false,
			"spec.initContainers[0].lifecycle: Forbidden: may not be set for init containers without restartPolicy=Always"},
		{"v1.27", v127Refusal, 422, false, false, "may not be set for init containers"},
		{"RBAC", rbacRefusal, 403, false, true, "needs the permission to create pods in namespace cmp-injector"},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			q := r.URL.Query()
			if r.Method != http.MethodPost || r.URL.Path != "/api/v1/namespaces/cmp-injector/pods" ||
				q.Get("dryRun") != "All" || q.Get("fieldValidation") != "Strict" {
				t.Errorf("%s: request %s %s", c.name, r.Method, r.URL)
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(c.code)
			_, _ = w.Write([]byte(c.body))
		}))
		client, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
		if err != nil {
			t.Fatal(err)
		}
		d, err := Probe(context.Background(), client, "cmp-injector", "img")
		srv.Close()
		_, isU := errors.AsType[*Undecided](err)
		switch {
		case c.undecided && (!isU || !strings.Contains(err.Error(), c.says)):
			t.Errorf("%s: %+v, %v; want undecided saying %q", c.name, d, err, c.says)
		case !c.undecided && (err != nil || d.Native != c.native || !strings.Contains(d.Reason, c.says)):
			t.Errorf("%s: %+v, %v; want native=%v saying %q", c.name, d, err, c.native, c.says)
		}
	}
}
