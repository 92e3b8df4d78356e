package command

import (
	"fmt"
	"strings"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// Argo CD's flag defaults for --loglevel and --logformat.
const (
	defaultLogLevel  = "info"
	defaultLogFormat = "json"
)

// logLevels maps every level name argocd-cmp-server accepts (logrus's, lower-cased)
// to the name it exports in ARGOCD_LOG_LEVEL, which is logrus's canonical one.
var logLevels = map[string]string{
	"trace": "trace", "debug": "debug", "info": "info",
	"warn": "warning", "warning": "warning",
	"error": "error", "fatal": "fatal", "panic": "panic",
}

// NormalizeLogLevel accepts a --loglevel value the way argocd-cmp-server does
// (logrus names in any case; empty means info) and returns the spelling Argo CD
// exports in ARGOCD_LOG_LEVEL, e.g. "WARN" → "warning". Plugins that pass the
// level on to Argo CD tools or compare it rely on that spelling.
func NormalizeLogLevel(level string) (string, error) {
	if level == "" {
		return defaultLogLevel, nil
	}
	if name, ok := logLevels[strings.ToLower(level)]; ok {
		return name, nil
	}
	return "", fmt.Errorf("unknown log level %q: want trace, debug, info, warn (or warning), error, fatal or panic", level)
}

// NormalizeLogFormat accepts a --logformat value as argocd-cmp-server does (json
// or text in any case; empty means text) and returns what it exports in
// ARGOCD_LOG_FORMAT.
func NormalizeLogFormat(format string) (string, error) {
	switch f := strings.ToLower(format); f {
	case "json", "text":
		return f, nil
	case "":
		return "text", nil
	}
	return "", fmt.Errorf("unknown log format %q: want json or text", format)
}

// LogEnv is what every plugin command gets on top of the sidecar's env.
// argocd-cmp-server writes its log level and format into its own environment at
// start-up, so its commands inherit them, replacing values the container was
// given, while the request env, added later, can still override them.
func LogEnv(level, format string) []string {
	return []string{keys.EnvLogLevel + "=" + level, keys.EnvLogFormat + "=" + format}
}

// NormalizeLogSettings fills in Argo CD's defaults for empty values (a zero
// Options) and checks and canonicalises the rest.
func NormalizeLogSettings(level, format *string) error {
	if *level == "" {
		*level = defaultLogLevel
	}
	if *format == "" {
		*format = defaultLogFormat
	}
	var err error
	if *level, err = NormalizeLogLevel(*level); err != nil {
		return err
	}
	*format, err = NormalizeLogFormat(*format)
	return err
}
