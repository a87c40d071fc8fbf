// Command vera is a transparent, Ollama-compatible memory proxy: it sits
// where Ollama used to listen, forwards every request to Ollama, and gives
// every chat a long-term memory. The program is package app; main only
// turns its result into an exit status.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/vera-proxy/vera/app"
	"github.com/vera-proxy/vera/config"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second signal kills at once
	}()
	err := app.Run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr, nil)
	stop()
	var ue app.UsageError
	switch {
	case err == nil:
	case errors.As(err, &ue):
		fmt.Fprintf(os.Stderr, "vera: %s\n\n%s", config.RedactText(ue.Msg), app.Usage)
		os.Exit(2)
	default:
		// Config errors quote the value they refuse, URLs included.
		fmt.Fprintf(os.Stderr, "vera: %s\n", config.RedactText(err.Error()))
		os.Exit(1)
	}
}
