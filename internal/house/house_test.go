package house_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// MaxInterfaceMethods bounds every interface of the project: one concern's methods. A
// consumer that needs more declares a struct of the small interfaces it uses (api.Stores).
const MaxInterfaceMethods = 12

const modulePath = "github.com/paykit/paykit"

// iface is one interface as written: its own methods and what it embeds.
type iface struct {
	pos     string
	methods int
	embeds  []string // "dir.Name": the directory of the package that declares it, from the module root
}

// No interface of the project, counting what it embeds, has more than
// MaxInterfaceMethods methods.
func TestNoInterfaceHasMoreThanADozenMethods(t *testing.T) {
	ifaces := readInterfaces(t, "../..")
	if len(ifaces) < 20 {
		t.Fatalf("read %d interfaces; the walk missed the project", len(ifaces))
	}
	var count func(name string, seen map[string]bool) int
	count = func(name string, seen map[string]bool) int {
		in, ok := ifaces[name]
		if !ok || seen[name] { // another module's (context.Context, error, ...): not ours to bound
			return 0
		}
		seen[name] = true
		n := in.methods
		for _, e := range in.embeds {
			n += count(e, seen)
		}
		return n
	}
	for name, in := range ifaces {
		if n := count(name, map[string]bool{}); n > MaxInterfaceMethods {
			t.Errorf("%s (%s) has %d methods, more than %d: split it by concern", name, in.pos, n, MaxInterfaceMethods)
		}
	}
}

// readInterfaces parses every Go file of the module under root, tests too, except tools/
// (modules of their own) and generated files ("Code generated ... DO NOT EDIT."), keyed
// by "dir.Name" (dir from the module root), so that two packages of one name do not hide
// each other; an embedded pkg.Name is resolved through
// the file's imports, aliases included. Type parameters are read through (Foo[T] is Foo).
func readInterfaces(t *testing.T, root string) map[string]iface {
	t.Helper()
	out := map[string]iface{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != root && (strings.HasPrefix(n, ".") || n == "tools" || n == "node_modules" || n == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, p, src, parser.SkipObjectResolution|parser.ParseComments)
		if err != nil {
			return err
		}
		if ast.IsGenerated(f) { // a generator's shapes (the clients' from the contract) are not ours to bound
			return nil
		}
		rel, _ := filepath.Rel(root, filepath.Dir(p))
		own := filepath.ToSlash(rel)
		if strings.HasSuffix(f.Name.Name, "_test") {
			own += "_test" // an external test package's names are its own
		}
		imports := map[string]string{} // local name -> dir, for this module's packages
		for _, im := range f.Imports {
			path := strings.Trim(im.Path.Value, `"`)
			dir, ok := strings.CutPrefix(path, modulePath+"/")
			if !ok {
				continue
			}
			name := dir[strings.LastIndex(dir, "/")+1:]
			if im.Name != nil {
				name = im.Name.Name
			}
			imports[name] = dir
		}
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			it, ok := ts.Type.(*ast.InterfaceType)
			if !ok {
				return true
			}
			in := iface{pos: fset.Position(ts.Pos()).String()}
			for _, m := range it.Methods.List {
				e := m.Type
				if ix, ok := e.(*ast.IndexExpr); ok {
					e = ix.X
				} else if ix, ok := e.(*ast.IndexListExpr); ok {
					e = ix.X
				}
				switch e := e.(type) {
				case *ast.FuncType:
					in.methods += len(m.Names)
				case *ast.Ident:
					in.embeds = append(in.embeds, own+"."+e.Name)
				case *ast.SelectorExpr:
					if x, ok := e.X.(*ast.Ident); ok {
						if dir, ok := imports[x.Name]; ok {
							in.embeds = append(in.embeds, dir+"."+e.Sel.Name)
						}
					}
				}
			}
			out[own+"."+ts.Name.Name] = in
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
