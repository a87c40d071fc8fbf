package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/embedded"
)

// Cache is the prompt-cache figure of a 10-turn chat: for each later
// turn, the share of the previous prompt plus its answer that the new
// prompt repeats from its start. Ollama's prompt cache reuses exactly that
// much; what differs is evaluated again, on a small GPU seconds a turn.
type Cache struct {
	Turns  int       `json:"turns"`
	Direct []float64 `json:"direct"`
	Vera   []float64 `json:"vera"`
	// VeraMean is the mean of Vera.
	VeraMean float64 `json:"vera_mean"`
}

// prompt renders a forwarded chat's messages as a template would, in
// order: what a prompt cache compares.
func prompt(body []byte) (string, error) {
	var req struct {
		Messages []struct{ Role, Content string } `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return "", err
	}
	var b strings.Builder
	for _, m := range req.Messages {
		fmt.Fprintf(&b, "<|%s|>%s<|end|>", m.Role, m.Content)
	}
	return b.String(), nil
}

func repeated(prev, next string) float64 {
	if prev == "" {
		return 1
	}
	n := 0
	for n < len(prev) && n < len(next) && prev[n] == next[n] {
		n++
	}
	return float64(n) / float64(len(prev))
}

// measureCache runs one 10-turn chat directly and through vera (memory
// on, a few memories in the namespace that the chat brings up).
func measureCache(bin, work string, log io.Writer) (Cache, error) {
	c := Cache{Turns: 10}
	fake, err := fakeChild(1, 0)
	if err != nil {
		return c, err
	}
	defer fake.stop()
	dir := filepath.Join(work, "cache")
	db, err := embedded.Open(context.Background(), dir)
	if err != nil {
		return c, err
	}
	var ms []memory.Memory
	for i, fact := range []string{"My sister Ana lives in Lisbon.", "I run a marathon in April.", "My dog is called Biscuit.", "I work as a nurse in Porto.", "My favourite food is pasta."} {
		ms = append(ms, memory.Memory{ID: memory.NewID(), Namespace: "cache", Type: memory.Curated, Text: fact, Time: time.Now().Add(-time.Duration(100-i) * time.Hour), Tokens: 8})
	}
	if err := db.Upsert(context.Background(), ms...); err != nil {
		db.Close()
		return c, err
	}
	db.Close()
	v, err := startVera(bin, fake.base, dir)
	if err != nil {
		return c, err
	}
	defer v.stop()
	questions := []string{"Hi!", "Where does my sister live?", "What should I cook tonight?", "Any tips for my marathon?", "What is my dog called?",
		"Tell me about Lisbon.", "How is work as a nurse?", "What about Porto?", "Should I get a second dog?", "Thanks, bye!"}
	for _, p := range []path{{"direct", fake.base}, {"vera", v.base}} {
		fmt.Fprintf(log, "bench: prompt cache, %s\n", p.name)
		var history []map[string]string
		prev := ""
		for i, q := range questions {
			history = append(history, map[string]string{"role": "user", "content": q})
			body, _ := json.Marshal(map[string]any{"model": "llama3.2", "stream": false, "messages": history})
			if _, err := call("POST", p.base+"/api/chat", string(body), "X-OpenWebUI-User-Id", "cache", "X-OpenWebUI-Chat-Id", "cache-"+p.name); err != nil {
				return c, err
			}
			last, err := get(fake.base + "/bench/last")
			if err != nil {
				return c, err
			}
			cur, err := prompt(last)
			if err != nil {
				return c, err
			}
			answer := "Fine, thanks."
			if i > 0 {
				share := repeated(prev, cur)
				if p.name == "direct" {
					c.Direct = append(c.Direct, share)
				} else {
					c.Vera = append(c.Vera, share)
				}
			}
			prev = cur + "<|assistant|>" + answer + "<|end|>"
			history = append(history, map[string]string{"role": "assistant", "content": answer})
		}
	}
	for _, s := range c.Vera {
		c.VeraMean += s / float64(len(c.Vera))
	}
	return c, nil
}

func get(url string) ([]byte, error) {
	res, err := client.Get(url)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	return io.ReadAll(res.Body)
}
