package registry_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/registry"
)

// While the store cannot take writes, each write answers 503 STORE_UNAVAILABLE with
// Retry-After, /ready answers 503 too while /health stays 200, and the refusals are logged
// in one burst, not one line each.
func TestStoreUnavailableAnswers(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the disk is watched on Linux only")
	}
	var logs testkit.Buffer
	h := newHarness(t, func(c *registry.Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	status, raw := h.do("GET", "/ready", nil, "")
	if status != http.StatusOK || string(raw) != `{"ready":true,"store":"ok"}`+"\n" {
		t.Fatalf("ready with the store healthy: %d %s", status, raw)
	}
	if err := os.RemoveAll(h.dir); err != nil {
		t.Fatal(err)
	}
	const writes = 40
	for i := range writes {
		body, _ := json.Marshal(newNode(t, string(rune('a'+i%26))+strings.Repeat("x", i/26)).registration(t, "203.0.113.8:7000"))
		res, err := h.srv.Client().Post(h.srv.URL+"/api/v1/register", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") != "2" {
			t.Fatalf("register with the store gone: %d, Retry-After %q; want 503 and 2", res.StatusCode, res.Header.Get("Retry-After"))
		}
	}
	res, err := h.srv.Client().Get(h.srv.URL + "/ready")
	if err != nil {
		t.Fatal(err)
	}
	var e struct{ Code string }
	json.NewDecoder(res.Body).Decode(&e)
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") != "2" || e.Code != "STORE_UNAVAILABLE" {
		t.Errorf("ready with the store gone: %d %s, Retry-After %q", res.StatusCode, e.Code, res.Header.Get("Retry-After"))
	}
	if status, _ := h.do("GET", "/health", nil, ""); status != http.StatusOK {
		t.Errorf("health with the store gone: %d, want 200", status)
	}
	if n := strings.Count(logs.String(), "store unavailable"); n < 1 || n > 5 {
		t.Errorf("%d writes refused logged %d lines, want 1 to 5:\n%s", writes, n, logs.String())
	}
}
