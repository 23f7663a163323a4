package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/registry/httpapi"
	"github.com/svrp/svrp/store"
)

// TestAnswersAreNosniff: JSON answers, errors, listings and the OpenAPI document all carry
// X-Content-Type-Options: nosniff.
func TestAnswersAreNosniff(t *testing.T) {
	svc, err := registry.New(registry.Config{Store: store.NewMemory()})
	if err != nil {
		t.Fatal(err)
	}
	h := httpapi.New(svc)
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/health", ""},
		{"GET", "/nodes", ""},
		{"GET", "/peers", ""},
		{"GET", "/api/v1/peers", ""},
		{"GET", "/openapi.json", ""},
		{"POST", "/v1/auth/challenge", ""},
		{"POST", "/api/v1/register", "{not json"},
		{"GET", "/no/such/endpoint", ""},
		{"BREW", "/nodes", ""},
		{"GET", "/v1/operator/me/nodes", ""},
	} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(c.method, c.path, strings.NewReader(c.body)))
		if got := w.Header().Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s %s (%d): X-Content-Type-Options %q", c.method, c.path, w.Code, got)
		}
		if w.Code == http.StatusOK && w.Header().Get("Content-Type") == "" {
			t.Errorf("%s %s: no Content-Type", c.method, c.path)
		}
	}
}
