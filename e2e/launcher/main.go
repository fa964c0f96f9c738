// Command kinformer-e2e starts a real kube-apiserver and etcd on loopback for
// kinformer's end-to-end tests (in the spirit of controller-runtime's envtest,
// but driven from a shell script and with processes that outlive the
// launcher).
//
// Commands:
//
//	up                --dir DIR   fresh PKI + etcd + kube-apiserver, writes DIR/kubeconfig
//	down              --dir DIR   stop both (idempotent); --purge also deletes DIR's data
//	restart-apiserver --dir DIR   stop and start kube-apiserver with the same ports and data
//	compact           --dir DIR   compact etcd past its current revision (old resourceVersions -> 410)
//	status            --dir DIR   report whether the processes are alive
//	etcd              (hidden)    run an embedded etcd in the foreground
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"time"
)

const usage = `usage: kinformer-e2e COMMAND [flags]

commands:
  up                --dir DIR [--timeout 120s] [--apiserver-bin PATH] [--apiserver-arg ARG]...
  down              --dir DIR [--purge]
  restart-apiserver --dir DIR [--timeout 120s]
  compact           --dir DIR [--wait=false]
  status            --dir DIR
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	cmd, args := os.Args[1], os.Args[2:]
	var err error
	switch cmd {
	case "up":
		err = cmdUp(args)
	case "down":
		err = cmdDown(args)
	case "restart-apiserver":
		err = cmdRestartAPIServer(args)
	case "compact":
		err = cmdCompact(args)
	case "status":
		err = cmdStatus(args)
	case "etcd":
		err = cmdEtcd(args)
	case "help", "-h", "--help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "kinformer-e2e: unknown command %q\n%s", cmd, usage)
		os.Exit(2)
	}
	if err != nil {
		var ee exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		fmt.Fprintf(os.Stderr, "kinformer-e2e %s: %v\n", cmd, err)
		os.Exit(1)
	}
}

// exitError ends the program with a given code and no further message.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// progress prints a progress line on stderr (stdout is reserved for results).
func progress(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "[kinformer-e2e %s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, a...))
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return fmt.Sprint(*s) }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func newFlagSet(name string) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	dir := fs.String("dir", defaultDir(), "working folder (data, certs, logs, kubeconfig, state.json)")
	return fs, dir
}

func defaultDir() string {
	if d := os.Getenv("KINFORMER_E2E_DIR"); d != "" {
		return d
	}
	return "/tmp/kinformer-e2e"
}

// openDir parses a command's flags and loads the state of its --dir; the state is nil when
// nothing was started there.
func openDir(fs *flag.FlagSet, dir *string, args []string) (layout, *state, error) {
	if err := parse(fs, args); err != nil {
		return layout{}, nil, err
	}
	l, err := newLayout(*dir)
	if err != nil {
		return layout{}, nil, err
	}
	st, err := loadState(l)
	return l, st, err
}

func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	return nil
}
