package toolrun

import (
	"fmt"
	"io"
	"os"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/pkg/params"
	"github.com/cmp-injector/cmp-injector/pkg/serving"
)

// GenerateAction parses the arguments of a built-in plugin whose one action
// is generate, and returns the Application's parameters
// (ARGOCD_APP_PARAMETERS) and the app directory (the working directory).
func GenerateAction(fs *serving.FlagSet, args []string) ([]params.AppParameter, string, error) {
	action, err := fs.ParseAction(args)
	if err != nil {
		return nil, "", err
	}
	switch action {
	case "generate":
	case "":
		return nil, "", fs.Errorf("an action is required: generate")
	default:
		return nil, "", fs.Errorf("unknown action %q: want generate", action)
	}
	return AppRequest()
}

// AppRequest is what a plugin command reads of its request: the Application's
// parameters (ARGOCD_APP_PARAMETERS) and the app directory (the working
// directory).
func AppRequest() ([]params.AppParameter, string, error) {
	ps, err := params.Decode([]byte(os.Getenv(keys.EnvAppParameters)))
	if err != nil {
		return nil, "", err
	}
	dir, err := os.Getwd()
	return ps, dir, err
}

// Warn prints a built-in plugin's warnings on w, one "warning: " line each:
// the repo-server logs a command's stderr, the Application never shows it.
func Warn(w io.Writer, warnings []string) error {
	for _, m := range warnings {
		if _, err := fmt.Fprintf(w, "warning: %s\n", m); err != nil {
			return err
		}
	}
	return nil
}
