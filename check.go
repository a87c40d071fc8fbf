package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/vera-proxy/vera/config"
	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/embedded"
	"github.com/vera-proxy/vera/memory/qdrant"
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
	if !cfg.Memory.Enabled {
		fmt.Fprintln(out, "ok   memory: off (memory.enabled = false)")
	} else if !checkMemory(ctx, cfg, client, upstream, out) {
		return errors.New("check failed")
	}
	fmt.Fprintln(out, "all checks passed")
	return nil
}

// checkMemory opens the store and embeds a probe text, reporting both. It
// reports whether both are usable.
func checkMemory(ctx context.Context, cfg config.Config, client *http.Client, upstream *url.URL, out io.Writer) bool {
	ok := true
	if cfg.General.QdrantHost != "" {
		ok = checkQdrant(ctx, cfg, out)
	} else if path := filepath.Join(cfg.Memory.DataDir, embedded.FileName); !exists(path) {
		fmt.Fprintf(out, "ok   store: embedded, %s (new: created when vera starts)\n", path)
	} else if db, err := embedded.Open(ctx, cfg.Memory.DataDir); errors.Is(err, embedded.ErrInUse) {
		fmt.Fprintf(out, "ok   store: embedded, %s (open in a running vera)\n", path)
	} else if err != nil {
		fmt.Fprintf(out, "FAIL store: %v\n", err)
		ok = false
	} else {
		spaces, _ := db.Namespaces(ctx)
		total := 0
		for _, ns := range spaces {
			n, _ := db.Count(ctx, memory.Filter{Namespace: ns})
			total += n
		}
		pending, _ := db.Len(ctx)
		fmt.Fprintf(out, "ok   store: embedded, %s (%d memories in %d namespaces, %d turns queued)\n", db.Path(), total, len(spaces), pending)
		db.Close()
	}

	model := cfg.General.EmbeddingModel
	dim, err := memory.Probe(ctx, memory.NewOllamaEmbedder(upstream, model, client))
	if err != nil {
		fmt.Fprintf(out, "FAIL embedder: %v (without it memory is lexical only)\n", err)
		return false
	}
	fmt.Fprintf(out, "ok   embedder: %s, %d dimensions\n", model, dim)
	return ok
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

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// checkQdrant reaches Qdrant and reports the collection.
func checkQdrant(ctx context.Context, cfg config.Config, out io.Writer) bool {
	q, err := qdrant.Open(ctx, qdrant.Options{URL: cfg.General.QdrantHost, Collection: cfg.General.QdrantCollection, APIKey: cfg.QdrantAPIKey})
	if err != nil {
		fmt.Fprintf(out, "FAIL store: %v\n", err)
		return false
	}
	defer q.Close()
	if err := q.Ping(ctx); err != nil {
		fmt.Fprintf(out, "FAIL store: %v\n", err)
		return false
	}
	spaces, err := q.Namespaces(ctx)
	if err != nil {
		fmt.Fprintf(out, "FAIL store: %v\n", err)
		return false
	}
	total := 0
	for _, ns := range spaces {
		n, err := q.Count(ctx, memory.Filter{Namespace: ns})
		if err != nil {
			fmt.Fprintf(out, "FAIL store: %v\n", err)
			return false
		}
		total += n
	}
	fmt.Fprintf(out, "ok   store: qdrant, %s, collection %q (%d memories in %d namespaces)\n", q.Addr(), q.Collection(), total, len(spaces))
	return true
}
