// Package cli holds what every peer's command line shares: the fatal-error exit, the -kubeconfig
// flag and seconds given as floats.
package cli

import (
	"flag"
	"fmt"
	"os"
	"time"
)

// Name prefixes every Die message; ExitCode is Die's exit status. Each command sets both in main.
var (
	Name     = "bench"
	ExitCode = 2
)

// Die prints "<Name>: <message>" to stderr and exits with ExitCode.
func Die(format string, args ...any) {
	fmt.Fprintf(os.Stderr, Name+": "+format+"\n", args...)
	os.Exit(ExitCode)
}

// Kubeconfig defines the -kubeconfig flag on fs (flag.CommandLine when nil), defaulting to
// $KUBECONFIG.
func Kubeconfig(fs *flag.FlagSet) *string {
	if fs == nil {
		fs = flag.CommandLine
	}
	return fs.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file")
}

// Seconds converts seconds given as a float (a flag's value) to a Duration.
func Seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
