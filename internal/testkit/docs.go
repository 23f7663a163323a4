package testkit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Doc returns the document docs/name of the module, for a test that holds it to the code.
func Doc(t testing.TB, name string) string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "docs", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Section returns the part of doc from the first start up to the first end, which must come
// after it; without such a part the test fails.
func Section(t testing.TB, doc, start, end string) string {
	t.Helper()
	i, j := strings.Index(doc, start), strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("the document has no part from %q to %q", start, end)
	}
	return doc[i:j]
}
