package harness

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
)

// statusError is a non-2xx answer of callJSON: each API's caller turns it
// into its own error from the body.
type statusError struct {
	Code   int
	Status string
	Body   []byte
}

func (e *statusError) Error() string { return e.Status + ": " + string(e.Body) }

// callJSON sends method url with header, in as the JSON body (when non-nil,
// with header's Content-Type, else application/json), and decodes a 2xx
// answer's body into out (when non-nil and the body is not empty). Any other
// answer is a *statusError. The REST client of the apiserver, Vault's and
// Argo CD's API clients share it.
func callJSON(hc *http.Client, method, url string, header http.Header, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		return err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if in != nil && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return &statusError{Code: resp.StatusCode, Status: resp.Status, Body: b}
	}
	if out != nil && len(b) > 0 {
		return json.Unmarshal(b, out)
	}
	return nil
}
