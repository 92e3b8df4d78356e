package playground

import (
	"embed"
	"io/fs"
	"net/http"
)

// assets is the page: plain HTML, CSS and JavaScript, no build step and nothing
// fetched from elsewhere, so the playground works offline.
//
//go:embed assets
var assets embed.FS

func assetHandler() http.Handler {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the directory is embedded above
	}
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		// Nothing but our own files may load or run, even if a plugin's
		// output or stderr carried markup (the page inserts it as text).
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
		h.Set("Cache-Control", "no-cache")
		h.Set("Referrer-Policy", "no-referrer")
		files.ServeHTTP(w, r)
	})
}
