package policy

import (
	"github.com/cmp-injector/cmp-injector/pkg/catalog"
)

// variable is one named CEL expression of a policy; later ones read earlier
// ones as variables.<name>.
type variable struct{ name, expr string }

// Sentinels the parts are built with, replaced by expressions: a UID no
// catalog uses and an image no pod can name.
const (
	sentinelUID   = 1_987_654_321
	sentinelImage = "cmp-injector.invalid/sentinel-image"
)

// program is the CEL both policies share, for one catalog.
type program struct {
	cat *catalog.Catalog
	// deciding are the variables that find the repo-server and decide
	// whether the pod may be injected (problems); the validating policy
	// needs only these.
	deciding []variable
	// adding are the variables that build what is added.
	adding []variable
	// patch is the mutating policy's JSONPatch expression.
	patch string
}

func newProgram(cat *catalog.Catalog) *program {
	p := &program{cat: cat}
	p.deciding = p.decide()
	p.adding = p.add()
	p.patch = p.patchExpr()
	return p
}
