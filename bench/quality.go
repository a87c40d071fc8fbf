package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
)

// Quality is `vera eval locomo` at each budget, lexical only, and
// `vera eval routing --embedder none` (no embedding model can be installed
// on this project's machines: the hybrid figures need one).
type Quality struct {
	LocomoFiles int               `json:"locomo_files"`
	Locomo      []json.RawMessage `json:"locomo,omitempty"`
	Routing     json.RawMessage   `json:"routing,omitempty"`
	Note        string            `json:"note,omitempty"`
}

// locomoFiles finds the shared LoCoMo files (never in this repository):
// VERA_LOCOMO_DIR, else ../shared/bench/locomo beside the checkout.
func locomoFiles() []string {
	dir := os.Getenv("VERA_LOCOMO_DIR")
	if dir == "" {
		dir = filepath.Join("..", "shared", "bench", "locomo")
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	return files
}

func measureQuality(bin string, quick bool, log io.Writer) (Quality, error) {
	var q Quality
	files := locomoFiles()
	q.LocomoFiles = len(files)
	budgets := []int{500, 1000, 2000, 4000}
	if quick {
		files = []string{filepath.Join("eval", "locomo", "testdata", "tiny.json")}
		budgets = []int{500}
	}
	if len(files) == 0 {
		q.Note = "the LoCoMo files are not on this machine (VERA_LOCOMO_DIR): no memory-quality figures"
	}
	for _, b := range budgets {
		if len(files) == 0 {
			break
		}
		fmt.Fprintf(log, "bench: vera eval locomo --budget %d\n", b)
		out, err := exec.Command(bin, append([]string{"eval", "locomo", "--budget", strconv.Itoa(b), "--embedder", "none"}, files...)...).Output()
		if err != nil {
			return q, fmt.Errorf("vera eval locomo: %w", err)
		}
		var r map[string]any
		if err := json.Unmarshal(out, &r); err != nil {
			return q, fmt.Errorf("vera eval locomo: %w", err)
		}
		r["budget"] = b
		raw, _ := json.Marshal(r)
		q.Locomo = append(q.Locomo, raw)
	}
	fmt.Fprintln(log, "bench: vera eval routing --embedder none")
	out, err := exec.Command(bin, "eval", "routing", "--embedder", "none").Output()
	if err != nil {
		return q, fmt.Errorf("vera eval routing: %w", err)
	}
	q.Routing = json.RawMessage(out)
	return q, nil
}
