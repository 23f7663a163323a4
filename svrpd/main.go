// Command svrpd is the svrp registry daemon and its command-line tools.
//
//	svrpd [serve] [flags]     serve the registry (the default command)
//
// Run "svrpd help" for every command and "svrpd serve -h" for the flags.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
