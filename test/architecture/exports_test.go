package architecture

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// maxInsideOnly is how many exported top-level identifiers may be used only
// inside their own package (its files and its tests): fewer than 20, as issue
// 27 asks. Lower it when you unexport one; never raise it.
const maxInsideOnly = 13

// TestExportedIdentifiersAreUsedOutside counts exported top-level functions,
// types, variables and constants that no other package of the module names
// (through pkg.Name in any .go file, tests included) and that nothing named
// outside exposes (as a field, parameter or result type, or as a constant of
// such a type), and fails when there are
// more than maxInsideOnly: an exported name that nobody outside uses widens the
// surface a reader has to learn. Methods and fields are not counted (they are
// reached through values, which a syntactic count cannot follow). Generated
// code (pluginpb, askpasspb) and main packages are left out.
func TestExportedIdentifiersAreUsedOutside(t *testing.T) {
	root := filepath.Join("..", "..")
	pkgs := parsePackages(t, root)
	used := map[string]bool{} // "dir.Name" named from another package
	for dir, p := range pkgs {
		for _, f := range p.files {
			imports := map[string]string{} // local name -> dir
			for _, imp := range f.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				rel, ok := strings.CutPrefix(path, module+"/")
				if !ok {
					continue
				}
				name := filepath.Base(rel)
				if imp.Name != nil {
					name = imp.Name.Name
				}
				imports[name] = rel
			}
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); ok {
					if target, ok := imports[x.Name]; ok && target != dir {
						used[target+"."+sel.Sel.Name] = true
					}
				}
				return true
			})
		}
	}
	// A name the used API exposes is used too: the type of an exported field,
	// parameter or result of something used outside (catalog.Plugin, reached
	// through Catalog.Plugins), followed to a fixed point.
	for changed := true; changed; {
		changed = false
		for dir, p := range pkgs {
			for name, refs := range p.refs {
				if !used[dir+"."+name] {
					continue
				}
				for ref := range refs {
					if !used[dir+"."+ref] {
						used[dir+"."+ref] = true
						changed = true
					}
				}
			}
		}
	}
	var inside []string
	total := 0
	for dir, p := range pkgs {
		if p.name == "main" || strings.HasPrefix(dir, "test/") || strings.HasSuffix(dir, "pluginpb") || strings.HasSuffix(dir, "askpasspb") {
			continue
		}
		for _, name := range p.exported {
			total++
			if !used[dir+"."+name] {
				inside = append(inside, dir+"."+name)
			}
		}
	}
	sort.Strings(inside)
	t.Logf("%d of %d exported top-level identifiers are used only inside their package:\n%s",
		len(inside), total, strings.Join(inside, "\n"))
	if len(inside) > maxInsideOnly {
		t.Errorf("%d exported identifiers are used only inside their package (at most %d): unexport them, or use them from where they belong",
			len(inside), maxInsideOnly)
	}
}

type parsed struct {
	name     string      // package name of the non-test files
	files    []*ast.File // every .go file, tests included
	exported []string    // exported top-level names of the non-test files
	// refs are the package's own exported names that an exported name's
	// declaration exposes: in a type, its exported fields and the signatures
	// of its exported methods; in a func, its signature; in a var or const,
	// its declared type.
	refs map[string]map[string]bool
}

// expose records that name's declaration exposes every exported identifier
// in expr (the package's own: a selector's X is another package).
func (p *parsed) expose(name string, expr ast.Node) {
	if expr == nil {
		return
	}
	ast.Inspect(expr, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.SelectorExpr:
			return false
		case *ast.Field:
			// An unexported field does not expose its type.
			if len(x.Names) > 0 && !anyExported(x.Names) {
				return false
			}
		case *ast.Ident:
			if x.IsExported() {
				p.exposeName(name, x.Name)
			}
		}
		return true
	})
}

// exposeName records that name exposes other.
func (p *parsed) exposeName(name, other string) {
	if p.refs == nil {
		p.refs = map[string]map[string]bool{}
	}
	if p.refs[name] == nil {
		p.refs[name] = map[string]bool{}
	}
	p.refs[name][other] = true
}

func anyExported(names []*ast.Ident) bool {
	for _, n := range names {
		if n.IsExported() {
			return true
		}
	}
	return false
}

// receiver is the type name of a method's receiver.
func receiver(d *ast.FuncDecl) string {
	t := d.Recv.List[0].Type
	if star, ok := t.(*ast.StarExpr); ok {
		t = star.X
	}
	switch x := t.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.IndexExpr:
		if id, ok := x.X.(*ast.Ident); ok {
			return id.Name
		}
	}
	return ""
}

// parsePackages parses every directory of the main module (nested modules,
// testdata and hidden directories left out), keyed by path from root.
func parsePackages(t *testing.T, root string) map[string]*parsed {
	t.Helper()
	fset := token.NewFileSet()
	pkgs := map[string]*parsed{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			base := d.Name()
			if rel != "." && (strings.HasPrefix(base, ".") || base == "testdata" || base == "bin" || base == "node_modules") {
				return filepath.SkipDir
			}
			if rel != "." {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir // another module
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		dir := filepath.ToSlash(filepath.Dir(rel))
		p := pkgs[dir]
		if p == nil {
			p = &parsed{}
			pkgs[dir] = p
		}
		p.files = append(p.files, f)
		if strings.HasSuffix(path, "_test.go") {
			return nil
		}
		p.name = f.Name.Name
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				switch {
				case d.Recv == nil && d.Name.IsExported():
					p.exported = append(p.exported, d.Name.Name)
					p.expose(d.Name.Name, d.Type)
				case d.Recv != nil && d.Name.IsExported():
					p.expose(receiver(d), d.Type)
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							p.exported = append(p.exported, s.Name.Name)
							p.expose(s.Name.Name, s.Type)
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								p.exported = append(p.exported, n.Name)
								p.expose(n.Name, s.Type)
								// A constant of an exported type of the package is
								// one of that type's values (inject.ReasonNoCatalog
								// of inject.Reason): the type exposes it.
								if t, ok := s.Type.(*ast.Ident); ok && d.Tok == token.CONST && t.IsExported() {
									p.exposeName(t.Name, n.Name)
								}
							}
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}
