package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/vera-proxy/vera/config"
	"github.com/vera-proxy/vera/proxy"
)

// check validates the configuration and reaches Ollama, printing a report a
// person can read. It fails when anything vera needs is missing.
func check(ctx context.Context, cfg config.Config, loadErr error, out io.Writer) error {
	if loadErr != nil {
		fmt.Fprintf(out, "FAIL config: %v\n", loadErr)
		return errors.New("check failed")
	}
	src := "built-in defaults (no config file)"
	if cfg.Path != "" {
		src = cfg.Path
	}
	fmt.Fprintf(out, "ok   config: %s\n", src)
	for _, w := range cfg.Warnings {
		fmt.Fprintf(out, "warn config: %s\n", w)
	}
	fmt.Fprintf(out, "ok   listen: %s\n", cfg.Server.Listen)

	upstream, err := config.ParseUpstream(cfg.General.OllamaHost, "11434")
	if err != nil {
		fmt.Fprintf(out, "FAIL ollama: %v\n", err)
		return errors.New("check failed")
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	client := &http.Client{Transport: proxy.NewTransport(5 * time.Second)}
	h := proxy.ProbeOllama(ctx, client, upstream)
	if !h.OK {
		fmt.Fprintf(out, "FAIL ollama: %s unreachable: %s\n", h.URL, h.Error)
		return errors.New("check failed")
	}
	fmt.Fprintf(out, "ok   ollama: %s, version %s (%.1f ms)\n", h.URL, h.Version, h.LatencyMS)

	models, err := listModels(ctx, client, upstream.JoinPath("/api/tags").String())
	if err != nil {
		fmt.Fprintf(out, "FAIL ollama models: %v\n", err)
		return errors.New("check failed")
	}
	if len(models) == 0 {
		fmt.Fprintf(out, "warn ollama models: none installed (ollama pull <model>)\n")
	} else {
		fmt.Fprintf(out, "ok   ollama models (%d): %s\n", len(models), strings.Join(models, ", "))
	}
	fmt.Fprintln(out, "all checks passed")
	return nil
}

func listModels(ctx context.Context, client *http.Client, url string) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	res, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /api/tags: %s", res.Status)
	}
	var tags struct {
		Models []struct {
			Name string `json:"name"`
		} `json:"models"`
	}
	if err := json.NewDecoder(res.Body).Decode(&tags); err != nil {
		return nil, fmt.Errorf("GET /api/tags: %w", err)
	}
	names := make([]string, 0, len(tags.Models))
	for _, m := range tags.Models {
		names = append(names, m.Name)
	}
	sort.Strings(names)
	return names, nil
}

// healthcheck asks the vera listening on server.listen for /healthz and
// fails unless it answers 200 (ok or degraded). Container images have no
// curl, so the binary checks itself.
func healthcheck(ctx context.Context, cfg config.Config, out io.Writer) error {
	host, port, err := net.SplitHostPort(cfg.Server.Listen)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(host, port)+"/healthz", nil)
	if err != nil {
		return err
	}
	res, err := (&http.Client{Transport: proxy.NewTransport(5 * time.Second)}).Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	fmt.Fprintf(out, "%s", body)
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: %s", res.Status)
	}
	return nil
}
