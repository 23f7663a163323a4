package budget

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Every Limit constant of the package is in Names, once, and Names holds nothing else: a
// limit left out would be counted under no label of its own.
func TestNamesAreTheLimitConstants(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "refusals.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var consts []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			v := s.(*ast.ValueSpec)
			for i, n := range v.Names {
				if !strings.HasPrefix(n.Name, "Limit") {
					continue
				}
				lit, ok := v.Values[i].(*ast.BasicLit)
				if !ok {
					t.Fatalf("%s is not a string literal", n.Name)
				}
				name, _ := strconv.Unquote(lit.Value)
				consts = append(consts, name)
			}
		}
	}
	got := Names()
	slices.Sort(consts)
	slices.Sort(got)
	if !slices.Equal(got, consts) {
		t.Errorf("Names() = %v\nwant the Limit constants %v", got, consts)
	}
	if len(slices.Compact(slices.Clone(got))) != len(got) {
		t.Errorf("Names() repeats a name: %v", got)
	}
}

// Names is a copy: changing it changes no one else's.
func TestNamesIsACopy(t *testing.T) {
	Names()[0] = "changed"
	if Names()[0] == "changed" {
		t.Error("Names returns the table itself")
	}
}
