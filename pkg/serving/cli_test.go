package serving

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

func testProgram(run func(context.Context, []string, IO) error) Program {
	return Program{Name: "prog", Summary: "does things", Default: "serve", Commands: []Command{
		{Name: "serve", Summary: "serves", Run: run},
		{Name: "other", Summary: "other things", Run: run},
	}}
}

func TestProgramExitCodes(t *testing.T) {
	for name, tc := range map[string]struct {
		args           []string
		err            error
		code           int
		stdout, stderr string
	}{
		"ok":             {[]string{"other"}, nil, 0, "", ""},
		"failure":        {[]string{"other"}, errors.New("boom"), 1, "", "prog other: boom\n"},
		"usage":          {[]string{"other"}, &usageError{Command: "prog other", Err: errors.New("bad")}, 2, "", "prog other: bad\nRun 'prog other --help' for usage.\n"},
		"exit as is":     {[]string{"other"}, &ExitError{Code: 3, Err: errors.New("Error: helm says")}, 3, "", "Error: helm says\n"},
		"silent exit":    {[]string{"other"}, &ExitError{Code: 4}, 4, "", ""},
		"help":           {[]string{"other"}, &helpRequest{Text: "usage: prog other\n"}, 0, "usage: prog other\n", ""},
		"default":        {nil, errors.New("from serve"), 1, "", "prog serve: from serve\n"},
		"default flags":  {[]string{"--x"}, errors.New("from serve"), 1, "", "prog serve: from serve\n"},
		"unknown":        {[]string{"nope"}, nil, 2, "", "prog: unknown command \"nope\"\n\nusage: prog <command>"},
		"wrapped usage":  {[]string{"other"}, errors.Join(&usageError{Command: "prog other", Err: errors.New("bad")}), 2, "", "prog other: bad\n"},
		"top-level help": {[]string{"--help"}, nil, 0, "usage: prog <command> [flags]\n\ndoes things\n\ncommands:\n  serve  serves (the default", ""},
	} {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			p := testProgram(func(context.Context, []string, IO) error { return tc.err })
			code := p.Main(context.Background(), tc.args, IO{Stdout: &stdout, Stderr: &stderr})
			if code != tc.code || !strings.HasPrefix(stdout.String(), tc.stdout) || !strings.HasPrefix(stderr.String(), tc.stderr) ||
				(tc.stdout == "" && stdout.Len() > 0) || (tc.stderr == "" && stderr.Len() > 0) {
				t.Errorf("exit %d (want %d)\nstdout %q (want %q)\nstderr %q (want %q)", code, tc.code, stdout.String(), tc.stdout, stderr.String(), tc.stderr)
			}
		})
	}
}

func TestFlagSetHelpAndErrors(t *testing.T) {
	fs := NewFlagSet("prog run", "ACTION [flags]")
	fs.String("config", "plugin.yaml", "the config")
	fs.Notes("more words")
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}, {"--config", "x", "help"}} {
		_, err := fs.ParseAction(args)
		var h *helpRequest
		if !errors.As(err, &h) || !strings.HasPrefix(h.Text, "usage: prog run ACTION [flags]\n\nflags:\n  -config string") || !strings.HasSuffix(h.Text, "\nmore words\n") {
			t.Errorf("%v: %v", args, err)
		}
	}
	action, err := fs.ParseAction([]string{"--config", "a", "generate", "--config", "b"})
	if action != "generate" || err != nil || fs.Lookup("config").Value.String() != "b" {
		t.Errorf("action %q, err %v", action, err)
	}
	for _, args := range [][]string{{"--nope"}, {"a", "b"}} {
		_, err := fs.ParseAction(args)
		var u *usageError
		if !errors.As(err, &u) || u.Command != "prog run" {
			t.Errorf("%v: %v", args, err)
		}
	}
}
