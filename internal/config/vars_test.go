package config_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/paykit/paykit/internal/config"
)

// TestConfigurationReferenceIsGenerated is the drift test: the table of
// docs/operate/configuration.md is config.Reference, as go generate writes it.
func TestConfigurationReferenceIsGenerated(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "operate", "configuration.md")
	page, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want, err := config.WithReference(string(page))
	if err != nil {
		t.Fatal(err)
	}
	if want != string(page) {
		t.Fatalf("%s differs from config.Vars; run: go generate ./internal/config", path)
	}
}

// TestEveryVariableReadIsInVars: every variable Load looks up is declared in Vars, and
// every one declared is looked up; so is every variable name written in the package's code.
func TestEveryVariableReadIsInVars(t *testing.T) {
	declared := map[string]bool{}
	for _, v := range config.Vars() {
		if declared[v.Name] {
			t.Errorf("%s is declared twice", v.Name)
		}
		declared[v.Name] = true
	}

	read := map[string]bool{}
	if _, err := config.Load(func(k string) (string, bool) { read[k] = true; return "", false }); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	for name := range read {
		if !declared[name] {
			t.Errorf("Load reads %s, which config.Vars lacks", name)
		}
	}
	for name := range declared {
		if !read[name] {
			t.Errorf("config.Vars declares %s, which Load never reads", name)
		}
	}

	// Names in the code that a run with the defaults does not reach (os.Getenv, a
	// lookup on one branch).
	varName := regexp.MustCompile(`^(PAYKIT|ALIPAY|OTEL)_[A-Z0-9_]+$`)
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") || file == "vars.go" {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err == nil && varName.MatchString(s) && !declared[s] {
				t.Errorf("%s: %s is not in config.Vars", fset.Position(lit.Pos()), s)
			}
			return true
		})
	}
}
