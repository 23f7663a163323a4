package httpapi

import (
	"net/http"
	"strconv"
)

// The transparency log's endpoints (docs/protocol.md): its checkpoint, its key and its tiles.

// Cache-Control of the log's answers: a checkpoint changes with every entry; a tile never
// changes once served, full or partial (a wider partial tile has a path of its own), so a
// CDN may keep it for good.
var (
	cacheCheckpoint = []string{"no-cache"}
	cacheTile       = []string{"public, max-age=31536000, immutable"}
	contentTypeText = []string{"text/plain; charset=utf-8"}
	contentTypeBin  = []string{"application/octet-stream"}
)

// logCheckpoint serves GET /log/checkpoint: the latest checkpoint, a signed note.
func (h *handler) logCheckpoint(w http.ResponseWriter, r *http.Request, _ call) {
	signed, err := h.s.Checkpoint(r.Context())
	writeLog(h, w, signed, err, contentTypeText, cacheCheckpoint)
}

// logKey serves GET /log/key: the verifier key of the checkpoints, as a line of text.
func (h *handler) logKey(w http.ResponseWriter, r *http.Request, _ call) {
	k, err := h.s.LogKey(r.Context())
	var b []byte
	if err == nil {
		b = []byte(k.Verifier() + "\n")
	}
	writeLog(h, w, b, err, contentTypeText, cacheCheckpoint)
}

// logTile serves GET /log/tile/...: a hash tile or an entry bundle (C2SP tlog-tiles).
func (h *handler) logTile(w http.ResponseWriter, r *http.Request, c call) {
	b, _, err := h.s.LogTile(r.Context(), "tile/"+c.id)
	writeLog(h, w, b, err, contentTypeBin, cacheTile)
}

// writeLog writes one of the log's answers, or its error as every endpoint does.
func writeLog(h *handler, w http.ResponseWriter, b []byte, err error, contentType, cache []string) {
	if err != nil {
		h.fail(w, err)
		return
	}
	hd := w.Header()
	hd["Content-Type"], hd["Cache-Control"] = contentType, cache
	hd.Set("Content-Length", strconv.Itoa(len(b)))
	w.Write(b)
}
