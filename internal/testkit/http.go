package testkit

import (
	"io"
	"net/http"
	"testing"
)

// Do sends req with c and returns the answer with its whole body read (resp.Body is closed).
// A request that gets no answer, or whose body cannot be read, fails the test.
func Do(t testing.TB, c *http.Client, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

// Get is [Do] of a GET of url with the default client.
func Get(t testing.TB, url string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return Do(t, http.DefaultClient, req)
}
