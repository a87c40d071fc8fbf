package app

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/vera-proxy/vera/config"
)

// newLogger logs to w at info level, or debug with debug; every value is
// redacted by redactAttr.
func newLogger(w io.Writer, debug bool) *slog.Logger {
	level := slog.LevelInfo
	if debug {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: redactAttr}))
}

// redactAttr masks the passwords of URLs in every logged value:
// vera shows its own URLs redacted, and this catches those quoted by
// errors from below, such as net/http's, which keep a URL's query.
func redactAttr(_ []string, a slog.Attr) slog.Attr {
	var s string
	switch a.Value.Kind() {
	case slog.KindString:
		s = a.Value.String()
	case slog.KindAny:
		switch v := a.Value.Any().(type) {
		case error:
			s = v.Error()
		case fmt.Stringer:
			s = v.String()
		default:
			return a
		}
	default:
		return a
	}
	if r := config.RedactText(s); r != s {
		a.Value = slog.StringValue(r)
	}
	return a
}
