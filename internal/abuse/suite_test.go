package abuse

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"github.com/svrp/svrp/internal/abuse/attack"
)

// Every row the load tool floods (package attack) has a test here, TestRow<N>..., that
// asserts its bound; and every such test belongs to a row.
func TestEveryRowIsAsserted(t *testing.T) {
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	tested := map[int][]string{}
	fset := token.NewFileSet()
	for _, f := range files {
		parsed, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for name, obj := range parsed.Scope.Objects {
			rest, ok := strings.CutPrefix(name, "TestRow")
			if !ok || obj.Kind != ast.Fun {
				continue
			}
			digits := strings.IndexFunc(rest, func(r rune) bool { return !unicode.IsDigit(r) })
			var n int
			if _, err := fmt.Sscan(rest[:max(digits, 0)], &n); err != nil {
				t.Errorf("%s: no row number after TestRow", name)
				continue
			}
			tested[n] = append(tested[n], name)
		}
	}
	for _, r := range attack.Rows {
		if len(tested[r.N]) == 0 {
			t.Errorf("row %d (%s) has no TestRow%d test asserting its bound: %s", r.N, r.What, r.N, r.Bound)
		}
		delete(tested, r.N)
	}
	for n, names := range tested {
		t.Errorf("%v test row %d, which package attack does not have", names, n)
	}
}
