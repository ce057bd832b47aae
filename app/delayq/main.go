// Command delayq runs delayq: the API, the workers, the recoverer and the
// order sweeper (serve), the workers alone (worker), a self-contained demo
// on embedded backends (demo), and the operator's commands. See README.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/delayq/delayq/app/cli"
)

// version is set at build time: -ldflags "-X main.version=v1.2.3".
var version string

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr, buildVersion())
	stop()
	os.Exit(code)
}

func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "devel"
}
