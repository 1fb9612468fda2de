// Command fakeship stands in for cmd/ship in the image tests while cmd/ship
// does not build: it answers GET /health on :8123 like ship does.
package main

import (
	"log"
	"net/http"
)

func main() {
	http.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"healthy","version":"fake"}`))
	})
	log.Fatal(http.ListenAndServe(":8123", nil))
}
