package canonical_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/internal/testkit"
)

// TestProtocolDocExample: the worked example of docs/protocol.md §3.6 is the vector
// session-basic byte for byte — its fields, its canonical lines, their hex and the
// signature — and canonical builds the same bytes from those fields.
func TestProtocolDocExample(t *testing.T) {
	blocks := fencedBlocks(testkit.Section(t, testkit.Doc(t, "protocol.md"), "### 3.6 Worked example", "## 4."))
	if len(blocks) != 4 {
		t.Fatalf("section 3.6 has %d code blocks, want 4 (fields, lines, hex, signature)", len(blocks))
	}

	var c testkit.SignedCase
	for _, v := range loadCanon(t).Cases {
		if v.ID == "session-basic" {
			c = v
		}
	}
	var docFields, vecFields map[string]any
	if err := json.Unmarshal([]byte(blocks[0]), &docFields); err != nil {
		t.Fatalf("the example's JSON: %v", err)
	}
	if err := json.Unmarshal(c.Fields, &vecFields); err != nil {
		t.Fatal(err)
	}
	if a, b := mustJSON(t, docFields), mustJSON(t, vecFields); a != b {
		t.Errorf("the example's fields\n%s\nare not the vector's\n%s", a, b)
	}
	if blocks[1] != c.ExpectedUTF8 {
		t.Errorf("the example's lines\n%q\nare not the vector's\n%q", blocks[1], c.ExpectedUTF8)
	}
	if got := strings.ReplaceAll(blocks[2], "\n", ""); got != c.ExpectedHex {
		t.Errorf("the example's hex is not the vector's")
	}
	if blocks[3] != c.SignatureB58 {
		t.Errorf("the example's signature %s is not the vector's %s", blocks[3], c.SignatureB58)
	}
	var m canonical.BindingSession
	if err := json.Unmarshal([]byte(blocks[0]), &m); err != nil {
		t.Fatal(err)
	}
	b, err := m.Bytes(c.Prefix)
	if err != nil || string(b) != blocks[1] {
		t.Errorf("canonical builds %q, %v from the example's fields", b, err)
	}
}

// fencedBlocks returns the contents of the ``` blocks of a Markdown text, without their
// fences.
func fencedBlocks(md string) []string {
	var out []string
	for {
		i := strings.Index(md, "```")
		if i < 0 {
			return out
		}
		rest := md[i+3:]
		nl := strings.IndexByte(rest, '\n')
		end := strings.Index(rest[nl+1:], "\n```")
		if nl < 0 || end < 0 {
			return out
		}
		out = append(out, rest[nl+1:nl+1+end])
		md = rest[nl+1+end+4:]
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
