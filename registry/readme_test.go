package registry_test

import (
	"encoding/json"
	"go/format"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/svrp/svrp/internal/testkit"
)

// The README's embedding recipe is a whole program: it must build as written, serve the API,
// and stop cleanly on SIGINT with its upkeep and store closed in order.
func TestREADMEEmbeddingRecipe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a program")
	}
	src := embeddingRecipe(t)
	if formatted, err := format.Source([]byte(src)); err != nil || string(formatted) != src {
		t.Errorf("the recipe is not gofmt'ed (%v)", err)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// The recipe is built as a package of this module that exists only in the overlay, so it
	// imports this module's packages as an embedder's program imports them.
	main := filepath.Join(dir, "main.go")
	if err := os.WriteFile(main, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	overlay, _ := json.Marshal(map[string]any{"Replace": map[string]string{
		filepath.Join(root, "internal", "readmerecipe", "main.go"): main,
	}})
	overlayFile := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(overlayFile, overlay, 0o600); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "recipe")
	build := exec.Command("go", "build", "-overlay", overlayFile, "-o", bin, "./internal/readmerecipe")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	addr := testkit.FreeAddr(t)
	data := filepath.Join(dir, "data")
	var stderr strings.Builder
	cmd := exec.Command(bin, "-listen", addr, "-data", data)
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })

	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := http.Get("http://" + addr + "/nodes")
		if err == nil {
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				t.Fatalf("GET /nodes: %s", res.Status)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the recipe does not serve: %v\n%s", err, stderr.String())
		}
		select {
		case err := <-exited:
			t.Fatalf("the recipe exited before serving: %v\n%s", err, stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("the recipe did not stop cleanly: %v\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the recipe did not stop within 30s of SIGINT")
	}
	if _, err := os.Stat(filepath.Join(data, "MANIFEST")); err != nil {
		t.Errorf("no Badger store in the data directory: %v", err)
	}
}

// readmeSection returns what follows the README's heading (such as "## Packages") up to the
// next heading of level two, or to the end.
func readmeSection(t *testing.T, heading string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("README has no %s section", strings.TrimLeft(heading, "# "))
	}
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	return section
}

// embeddingRecipe returns the Go block of the README's Embedding section.
func embeddingRecipe(t *testing.T) string {
	t.Helper()
	_, code, ok := strings.Cut(readmeSection(t, "### Embedding"), "\n```go\n")
	if !ok {
		t.Fatal("README's Embedding section has no Go block")
	}
	code, _, ok = strings.Cut(code, "\n```\n")
	if !ok {
		t.Fatal("README's Embedding Go block does not end")
	}
	return code + "\n"
}

// The README's package table names every package of the module, and no other.
func TestREADMEPackageTable(t *testing.T) {
	listed := map[string]bool{}
	for _, line := range strings.Split(readmeSection(t, "## Packages"), "\n") {
		if name, ok := strings.CutPrefix(line, "| `"); ok {
			name, _, _ = strings.Cut(name, "`")
			listed[name] = true
		}
	}
	have := map[string]bool{}
	err := filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != ".." {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") {
			dir, _ := filepath.Rel("..", filepath.Dir(path))
			have[filepath.ToSlash(dir)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for p := range have {
		if !listed[p] {
			t.Errorf("package %s is not in the README's package table", p)
		}
	}
	for p := range listed {
		if !have[p] {
			t.Errorf("the README's package table names %s, which is no package", p)
		}
	}
}
