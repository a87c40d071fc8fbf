package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// Quality is `vera eval locomo --cv` at each budget, lexical only, and
// `vera eval routing --cv 5`: cross-validated figures only (no embedding
// model can be installed on this project's machines: the hybrid figures
// need one). The quick run (one tiny conversation) scores without
// cross-validation, and the router on its older set, to stay quick.
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
		args := []string{"eval", "locomo", "--budget", strconv.Itoa(b), "--embedder", "none"}
		if len(files) > 1 {
			args = append(args, "--cv")
		}
		fmt.Fprintf(log, "bench: vera %s\n", strings.Join(args, " "))
		out, err := exec.Command(bin, append(args, files...)...).Output()
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
	args := []string{"eval", "routing", "--cv", "5"}
	if quick {
		args = []string{"eval", "routing", "--embedder", "none"}
	}
	fmt.Fprintf(log, "bench: vera %s\n", strings.Join(args, " "))
	out, err := exec.Command(bin, args...).Output()
	if err != nil {
		return q, fmt.Errorf("vera eval routing: %w", err)
	}
	q.Routing = json.RawMessage(out)
	return q, nil
}
