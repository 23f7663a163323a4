package httpapi_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/registry/httpapi"
)

// TestProtocolDocCovers: docs/protocol.md names every endpoint the registry serves, and its
// table of codes (section 7) gives every code the registry sends with the status it is sent
// with, so the document cannot fall behind the code unnoticed.
func TestProtocolDocCovers(t *testing.T) {
	doc := testkit.Doc(t, "protocol.md")
	for _, e := range httpapi.Operations() {
		if name := "`" + e.Method + " " + e.Path + "`"; !strings.Contains(doc, name) {
			t.Errorf("docs/protocol.md does not name %s", name)
		}
	}
	codes := testkit.Section(t, doc, "\n## 7. ", "\n## 8. ")
	for code, status := range httpapi.Statuses() {
		row := "\n| `" + code + "`"
		i := strings.Index(codes, row)
		if i < 0 {
			t.Errorf("section 7 of docs/protocol.md has no row for %s", code)
			continue
		}
		line, _, _ := strings.Cut(codes[i+1:], "\n")
		if !strings.Contains(line, fmt.Sprintf("| %d |", status)) {
			t.Errorf("section 7 of docs/protocol.md gives %s another status than %d: %s", code, status, line)
		}
	}
}
