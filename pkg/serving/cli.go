package serving

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// Exit codes of both binaries (the README lists them). A script tells a refusal
// of its input (1) from a wrong command line (2) without parsing text.
const (
	// exitOK: the command did what was asked; for inject and explain, every
	// object is injected or skipped.
	exitOK = 0
	// ExitFailure: the command failed; for inject and explain, an object is
	// denied.
	ExitFailure = 1
	// exitUsage: the command line is wrong (unknown command or flag, missing
	// or bad value).
	exitUsage = 2
)

// IO is where a command reads and writes; Main never touches os.Std*.
type IO struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// Command is one subcommand. Run returns an error instead of printing it, so
// Program.Main prints each failure once and alone decides the exit code.
type Command struct {
	Name    string
	Summary string
	Run     func(ctx context.Context, args []string, io IO) error
}

// Program is a binary's table of subcommands.
type Program struct {
	Name     string
	Summary  string
	Commands []Command
	// Default runs when there is no argument or the first one is a flag other
	// than help (cmp-server serves, like argocd-cmp-server). Empty: such a
	// command line is a usage error.
	Default string
	// ExitCodes is the help's last line; empty: the generic meaning of
	// exitOK, ExitFailure and exitUsage.
	ExitCodes string
}

// usageError is a wrong command line: printed with a pointer to the help,
// exit code 2.
type usageError struct {
	// Command is the command path, e.g. "cmp-server run".
	Command string
	Err     error
}

func (e *usageError) Error() string { return e.Err.Error() }
func (e *usageError) Unwrap() error { return e.Err }

// helpRequest asks Main to print Text on stdout and exit 0: --help, -h and
// help are answers, not errors, for every command.
type helpRequest struct{ Text string }

func (h *helpRequest) Error() string { return "help requested" }

// ExitError ends the program with Code. Err's text is printed as it is, with no
// command prefix (helm's own message, for one); a nil Err prints nothing.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit code %d", e.Code)
	}
	return e.Err.Error()
}
func (e *ExitError) Unwrap() error { return e.Err }

// VersionCommand is the version subcommand of program: it prints version.
func VersionCommand(program, version string) Command {
	return Command{Name: "version", Summary: "print the version", Run: func(_ context.Context, args []string, io IO) error {
		if err := NewFlagSet(program+" version", "").Parse(args); err != nil {
			return err
		}
		_, err := fmt.Fprintln(io.Stdout, version)
		return err
	}}
}

// Main runs args (without the program name) and returns the exit code. It is
// the one place that turns errors into text on stderr and exit codes.
func (p Program) Main(ctx context.Context, args []string, io IO) int {
	name, err := p.dispatch(ctx, args, io)
	return p.exit(name, err, io)
}

func (p Program) dispatch(ctx context.Context, args []string, io IO) (string, error) {
	if len(args) == 0 || (strings.HasPrefix(args[0], "-") && !isHelp(args[0]) && args[0] != "--version") {
		if p.Default == "" {
			return p.Name, &usageError{Command: p.Name, Err: errors.New("a command is required\n\n" + p.Usage())}
		}
		c, _ := p.command(p.Default)
		return p.Name + " " + c.Name, c.Run(ctx, args, io)
	}
	if isHelp(args[0]) {
		if len(args) > 1 {
			if c, ok := p.command(args[1]); ok {
				return p.Name + " " + c.Name, c.Run(ctx, []string{"--help"}, io)
			}
		}
		return p.Name, &helpRequest{Text: p.Usage()}
	}
	name := args[0]
	if name == "--version" {
		name = "version"
	}
	c, ok := p.command(name)
	if !ok {
		return p.Name, &usageError{Command: p.Name, Err: fmt.Errorf("unknown command %q\n\n%s", args[0], p.Usage())}
	}
	return p.Name + " " + c.Name, c.Run(ctx, args[1:], io)
}

func (p Program) command(name string) (Command, bool) {
	for _, c := range p.Commands {
		if c.Name == name {
			return c, true
		}
	}
	return Command{}, false
}

// Usage is the top-level help: what the program is, its commands, how to get
// a command's flags, and the exit codes.
func (p Program) Usage() string {
	var b strings.Builder
	fmt.Fprintf(&b, "usage: %s <command> [flags]\n", p.Name)
	if p.Summary != "" {
		fmt.Fprintf(&b, "\n%s\n", p.Summary)
	}
	b.WriteString("\ncommands:\n")
	width := len("help")
	for _, c := range p.Commands {
		width = max(width, len(c.Name))
	}
	for _, c := range p.Commands {
		summary := c.Summary
		if c.Name == p.Default {
			summary += " (the default: no command, or flags only)"
		}
		fmt.Fprintf(&b, "  %-*s  %s\n", width, c.Name, summary)
	}
	fmt.Fprintf(&b, "  %-*s  %s\n", width, "help", "print this help; 'help COMMAND' prints the command's")
	fmt.Fprintf(&b, "\nRun '%s COMMAND --help' for a command's flags.\n", p.Name)
	if p.ExitCodes != "" {
		fmt.Fprintln(&b, p.ExitCodes)
	} else {
		fmt.Fprintf(&b, "Exit codes: %d success, %d failure, %d usage error.\n", exitOK, ExitFailure, exitUsage)
	}
	return b.String()
}

func (p Program) exit(name string, err error, io IO) int {
	var (
		help  *helpRequest
		usage *usageError
		exit  *ExitError
	)
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &help):
		fmt.Fprint(io.Stdout, help.Text)
		return exitOK
	case errors.As(err, &usage):
		fmt.Fprintf(io.Stderr, "%s: %v\n", usage.Command, usage.Err)
		if !strings.Contains(usage.Err.Error(), "\nusage: ") {
			fmt.Fprintf(io.Stderr, "Run '%s --help' for usage.\n", usage.Command)
		}
		return exitUsage
	case errors.As(err, &exit):
		if exit.Err != nil {
			fmt.Fprintln(io.Stderr, exit.Err)
		}
		return exit.Code
	default:
		fmt.Fprintf(io.Stderr, "%s: %v\n", name, err)
		return ExitFailure
	}
}

func isHelp(arg string) bool {
	return arg == "help" || arg == "-h" || arg == "--help" || arg == "-help"
}

// FlagSet is a flag.FlagSet whose parse errors and help come back as errors
// for Program.Main instead of being printed by the flag package (which wrote
// them to os.Stderr, a second time).
type FlagSet struct {
	*flag.FlagSet
	path, synopsis, notes string
}

// NewFlagSet names the command by its path ("cmp-server run") and its one-line
// synopsis of arguments ("generate|parameters|match --config FILE [flags]").
func NewFlagSet(path, synopsis string) *FlagSet {
	fs := flag.NewFlagSet(path, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &FlagSet{FlagSet: fs, path: path, synopsis: synopsis}
}

// Notes adds a paragraph after the flags in the help text.
func (f *FlagSet) Notes(text string) { f.notes = text }

// Usage is the command's help text.
func (f *FlagSet) Usage() string {
	var b strings.Builder
	fmt.Fprintf(&b, "usage: %s %s\n", f.path, f.synopsis)
	var flags strings.Builder
	f.SetOutput(&flags)
	f.PrintDefaults()
	f.SetOutput(io.Discard)
	if flags.Len() > 0 {
		b.WriteString("\nflags:\n")
		b.WriteString(flags.String())
	}
	if f.notes != "" {
		fmt.Fprintf(&b, "\n%s\n", strings.TrimRight(f.notes, "\n"))
	}
	return b.String()
}

// Parse parses args that are flags only.
func (f *FlagSet) Parse(args []string) error {
	if err := f.parse(args); err != nil {
		return err
	}
	if f.NArg() > 0 {
		if isHelp(f.Arg(0)) {
			return &helpRequest{Text: f.Usage()}
		}
		return f.Errorf("unexpected arguments %q", f.Args())
	}
	return nil
}

// ParseAction parses flags that may stand before or after one action word
// ("run generate --config f" or "run --config f generate") and returns it;
// "help" as the action is a help request.
func (f *FlagSet) ParseAction(args []string) (string, error) {
	if err := f.parse(args); err != nil {
		return "", err
	}
	if f.NArg() == 0 {
		return "", nil
	}
	action := f.Arg(0)
	if isHelp(action) {
		return "", &helpRequest{Text: f.Usage()}
	}
	if err := f.parse(f.Args()[1:]); err != nil {
		return "", err
	}
	if f.NArg() > 0 {
		return "", f.Errorf("unexpected arguments %q", f.Args())
	}
	return action, nil
}

func (f *FlagSet) parse(args []string) error {
	err := f.FlagSet.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return &helpRequest{Text: f.Usage()}
	case err != nil:
		return &usageError{Command: f.path, Err: err}
	}
	return nil
}

// Errorf is a usage error of this command.
func (f *FlagSet) Errorf(format string, a ...any) error {
	return &usageError{Command: f.path, Err: fmt.Errorf(format, a...)}
}

// ShutdownContext is ctx, ended by SIGTERM (the kubelet's stop) or SIGINT
// (Ctrl-C): what every long-running command drains on.
func ShutdownContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt)
}
