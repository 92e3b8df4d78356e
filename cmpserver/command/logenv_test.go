package command

import "testing"

func TestNormalizeLogSettings(t *testing.T) {
	// Argo CD parses the level with logrus (any case) and exports level.String(),
	// so "warn" becomes "warning"; an empty level is info.
	for in, want := range map[string]string{
		"trace": "trace", "debug": "debug", "INFO": "info", "": "info",
		"warn": "warning", "Warning": "warning", "error": "error", "fatal": "fatal", "panic": "panic",
	} {
		if got, err := NormalizeLogLevel(in); err != nil || got != want {
			t.Errorf("NormalizeLogLevel(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	// The format is lower-cased; an empty one is text.
	for in, want := range map[string]string{"json": "json", "JSON": "json", "text": "text", "Text": "text", "": "text"} {
		if got, err := NormalizeLogFormat(in); err != nil || got != want {
			t.Errorf("NormalizeLogFormat(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"verbose", "dpanic", "5"} {
		if _, err := NormalizeLogLevel(bad); err == nil {
			t.Errorf("NormalizeLogLevel(%q) accepted", bad)
		}
	}
	if _, err := NormalizeLogFormat("xml"); err == nil {
		t.Error(`NormalizeLogFormat("xml") accepted`)
	}
}
