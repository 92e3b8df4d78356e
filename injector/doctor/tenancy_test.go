package doctor

import (
	"strings"
	"testing"
)

// A plugin limited to some projects or repositories says so in
// catalog.valid, so that an admin sees who may use it.
func TestCatalogShowsTenancy(t *testing.T) {
	in := healthy(t)
	r := runOn(t, in.client(), Options{CatalogFile: "../testdata/golden/tenancy.catalog.yaml"})
	res := results(r, "catalog.valid")
	want := "; vault serves only projects [team-a, platform-*] and source repositories [https://github.com/example-org/*, !https://github.com/example-org/secrets]"
	if len(res) != 1 || !res[0].OK || !strings.HasSuffix(res[0].Message, want) {
		t.Errorf("%+v\nwant the message to end with %q", res, want)
	}
}
