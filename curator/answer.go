package curator

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/vera-proxy/vera/memory"
)

// Answer is what the curator model returns for one batch (plus
// source_ids: which raw turns each curated memory distils, so that only
// those are deleted and an interrupted run can be finished).
type Answer struct {
	NewCurated []CuratedTurn `json:"new_curated_turns"`
	Rules      []Rule        `json:"permanent_rules"`
	Deletions  []string      `json:"deletions"`
	Summary    string        `json:"summary"`
	// Profile is the namespace's new portrait of its user; empty: the
	// current one stays.
	Profile string `json:"profile,omitempty"`
	// ProfilePrivate marks the new profile private: it never leaves the
	// machine (memory.IsPrivate).
	ProfilePrivate bool `json:"profile_private,omitempty"`
}

// CuratedTurn is one curated memory to write.
type CuratedTurn struct {
	Content   string   `json:"content"`
	SourceIDs []string `json:"source_ids"`
	// Key names what the memory is about ("home city", "employer"): a
	// newer memory with the key of an older one of the namespace
	// supersedes it. Supersedes names that older memory outright.
	Key        string `json:"key,omitempty"`
	Supersedes string `json:"supersedes,omitempty"`
	// Private: it holds special categories of personal data, finances or
	// secrets.
	Private bool `json:"private,omitempty"`
}

// Rule is a permanent rule, stored as a rule memory of the namespace whose
// turns taught it.
type Rule struct {
	Rule string `json:"rule"`
	// TargetFile is accepted, so that models prompted with the original
	// schema keep working, and ignored: whatever it holds (a path, a NUL
	// byte, curator_prompt.md), the rule goes to the namespace, never to a
	// file.
	TargetFile string `json:"target_file"`
	Private    bool   `json:"private,omitempty"`
}

// Schema is the JSON schema of Answer, sent as Ollama's `format` so the
// model's output is constrained to it (Ollama structured outputs).
var Schema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "new_curated_turns": {"type": "array", "items": {"type": "object", "properties": {
      "content": {"type": "string"},
      "source_ids": {"type": "array", "items": {"type": "string"}},
      "key": {"type": "string"},
      "supersedes": {"type": "string"},
      "private": {"type": "boolean"}
    }, "required": ["content", "source_ids"]}},
    "permanent_rules": {"type": "array", "items": {"type": "object", "properties": {
      "rule": {"type": "string"},
      "target_file": {"type": "string"},
      "private": {"type": "boolean"}
    }, "required": ["rule", "target_file"]}},
    "deletions": {"type": "array", "items": {"type": "string"}},
    "summary": {"type": "string"},
    "profile": {"type": "string"},
    "profile_private": {"type": "boolean"}
  },
  "required": ["new_curated_turns", "permanent_rules", "deletions", "summary"]
}`)

// errNoJSON: the answer holds no JSON object at all.
var errNoJSON = errors.New("no JSON object in the answer")

// ParseAnswer finds the answer's JSON object, whether it is the whole
// text, inside a ``` code fence, or inside prose, and decodes it strictly:
// unknown fields and wrong types are errors.
func ParseAnswer(text string) (*Answer, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return nil, errors.New("empty answer")
	}
	lastErr := errNoJSON
	for _, cand := range candidates(text) {
		dec := json.NewDecoder(strings.NewReader(cand))
		dec.DisallowUnknownFields()
		var a Answer
		if err := dec.Decode(&a); err != nil {
			lastErr = err
			continue
		}
		if dec.More() {
			lastErr = errors.New("text after the JSON object")
			continue
		}
		return &a, nil
	}
	return nil, fmt.Errorf("the answer is not the expected JSON: %w", lastErr)
}

// candidates returns the texts that may be the JSON object, most likely
// first: the whole answer, each fenced block, then each balanced {...}
// span of the prose.
func candidates(text string) []string {
	out := []string{text}
	rest := text
	for {
		i := strings.Index(rest, "```")
		if i < 0 {
			break
		}
		rest = rest[i+3:]
		j := strings.Index(rest, "```")
		if j < 0 {
			break
		}
		block := rest[:j]
		if nl := strings.IndexByte(block, '\n'); nl >= 0 && !strings.Contains(block[:nl], "{") {
			block = block[nl+1:] // the language tag line
		}
		out = append(out, strings.TrimSpace(block))
		rest = rest[j+3:]
	}
	b := []byte(text)
	for start := bytes.IndexByte(b, '{'); start >= 0; {
		if end := balanced(b[start:]); end > 0 {
			out = append(out, string(b[start:start+end]))
		}
		next := bytes.IndexByte(b[start+1:], '{')
		if next < 0 {
			break
		}
		start += 1 + next
	}
	return out
}

// balanced returns the length of the JSON object starting at b[0], or 0.
func balanced(b []byte) int {
	depth, inStr, esc := 0, false, false
	for i, c := range b {
		switch {
		case esc:
			esc = false
		case inStr && c == '\\':
			esc = true
		case c == '"':
			inStr = !inStr
		case inStr:
		case c == '{':
			depth++
		case c == '}':
			depth--
			if depth == 0 {
				return i + 1
			}
		}
	}
	return 0
}

// validate checks an answer against the batch it answers: every id must be
// one the model was shown, every curated memory a non-empty
// "User: ...\nAssistant: ..." exchange whose sources are raw turns of the
// batch, every rule non-empty. A deletion id must be a raw turn of the batch
// or a curated memory of the sample: never a rule, nor anything else.
func (a *Answer) validate(batch, shown map[string]bool) error {
	for i, c := range a.NewCurated {
		if _, _, ok := memory.ParseExchange(c.Content); !ok {
			return fmt.Errorf("new_curated_turns[%d]: content is not a \"User: ...\\nAssistant: ...\" exchange: %q", i, clip(c.Content))
		}
		for _, id := range c.SourceIDs {
			if !batch[id] {
				return fmt.Errorf("new_curated_turns[%d]: source id %q is not a raw turn of this batch", i, id)
			}
		}
		if c.Supersedes != "" && !shown[c.Supersedes] {
			// "none", or a made-up id: the key still decides.
			a.NewCurated[i].Supersedes = ""
		}
	}
	for _, id := range a.Deletions {
		if !batch[id] && !shown[id] {
			return fmt.Errorf("deletions: id %q was not shown to the curator", id)
		}
	}
	for i, r := range a.Rules {
		if strings.TrimSpace(r.Rule) == "" {
			return fmt.Errorf("permanent_rules[%d]: empty rule", i)
		}
	}
	return nil
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
