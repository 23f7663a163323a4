package registry_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/svrp/svrp/registry/api"
)

// packagePrefix matches a Go package name used as an error prefix ("authn: ", "store: "),
// at the start of a text or after a separator, as a wrapped cause's would appear. A hyphen
// before it is part of a word ("id-binding: …"), not a prefix.
var packagePrefix = regexp.MustCompile(`(^|[^A-Za-z0-9_.-])(authn|binding|canonical|didkey|proto|registry|api|client|store|daemon|cli|bench|cmdflag|svrpd?|badger|pgx|postgres|json|strconv|base58|http): `)

// checkErrorText fails t when raw is an error body whose text names a Go package: the
// client reads the text of a coded error, and Go-side context is added by wrapping, which the
// HTTP layer does not send.
func checkErrorText(t testing.TB, what string, status int, raw []byte) {
	t.Helper()
	if status < 400 {
		return
	}
	var e api.ErrorBody
	if json.Unmarshal(raw, &e) != nil {
		return
	}
	if m := packagePrefix.FindString(e.Error); m != "" {
		t.Errorf("%s: the error text %q names a Go package (%q)", what, e.Error, strings.TrimSpace(m))
	}
}

func TestCheckErrorText(t *testing.T) {
	for text, bad := range map[string]bool{
		"authn: no bearer token sent":                      true,
		"device credential: didkey: id-binding failed":     true,
		"store: not found":                                 true,
		"json: cannot unmarshal string into Go value":      true,
		"no bearer token sent":                             false,
		"device credential: operator id-binding: mismatch": false,
		"revocation: \"did:svrp:o:1\" breaks the grammar":  false,
		"authorization_credential: operator_did differs":   false,
	} {
		raw, _ := json.Marshal(api.ErrorBody{Code: "BAD_REQUEST", Error: text})
		rec := &recordingT{TB: t}
		checkErrorText(rec, "test", 400, raw)
		if rec.failed != bad {
			t.Errorf("%q: flagged %v, want %v", text, rec.failed, bad)
		}
	}
}

type recordingT struct {
	testing.TB
	failed bool
}

func (r *recordingT) Helper()               {}
func (r *recordingT) Errorf(string, ...any) { r.failed = true }

// parseSources parses the Go files of dir, its tests left out, and fails the test when it
// has none.
func parseSources(t *testing.T, fset *token.FileSet, dir string) []*ast.File {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no Go files in %s: %v", dir, err)
	}
	var files []*ast.File
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

// TestErrorTextsNameNoPackage reads every coded error the registry can send, at its source:
// each text given to proto.New, proto.Errorf, a sentinel's With and the packages' helpers
// that build them, in every package the HTTP layer reaches. None may start with, or carry, a
// package prefix.
func TestErrorTextsNameNoPackage(t *testing.T) {
	// Helpers that build a coded error, and the position of their text argument.
	builders := map[string]int{
		"proto.New": 1, "proto.Errorf": 1,
		"badRequest": 0, "badRequestf": 0, "badChallenge": 0, "failf": 0, "rateLimited": 1,
	}
	dirs := []string{"../authn", "../binding", "../canonical", "../didkey", "../proto", "../store", ".", "api"}
	fset := token.NewFileSet()
	texts := 0
	for _, dir := range dirs {
		for _, f := range parseSources(t, fset, dir) {
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				at, ok := builders[calleeName(call.Fun)]
				if sel, isSel := call.Fun.(*ast.SelectorExpr); isSel && sel.Sel.Name == "With" {
					at, ok = 0, true // a sentinel's case: ErrBadRequest.With("…")
				}
				if !ok || len(call.Args) <= at {
					return true
				}
				text, ok := firstString(call.Args[at])
				if !ok {
					return true
				}
				texts++
				if m := packagePrefix.FindString(text); m != "" {
					t.Errorf("%s: the error text %q names a Go package (%q)", fset.Position(call.Pos()), text, strings.TrimSpace(m))
				}
				return true
			})
		}
	}
	// The scan must have found the texts it is about, or it proves nothing.
	if texts < 150 {
		t.Fatalf("found only %d error texts; the scan no longer sees the builders", texts)
	}
}

// calleeName is "pkg.Func" for a qualified call and "func" for a local one.
func calleeName(fun ast.Expr) string {
	switch f := fun.(type) {
	case *ast.Ident:
		return f.Name
	case *ast.SelectorExpr:
		if x, ok := f.X.(*ast.Ident); ok {
			return x.Name + "." + f.Sel.Name
		}
	}
	return ""
}

// firstString is the first string literal of e in source order: the head of a text built by
// concatenation or the format of a Sprintf.
func firstString(e ast.Expr) (string, bool) {
	var s string
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		if found {
			return false
		}
		if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			if v, err := strconv.Unquote(lit.Value); err == nil {
				s, found = v, true
			}
		}
		return !found
	})
	return s, found
}
