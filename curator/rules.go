package curator

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode"
)

// ruleTarget resolves a rule's target file inside the prompts dir. Only a
// bare name ending in .md is accepted: no directories, no "..", nothing
// outside the prompts dir (Vera-AI let the model write to any path).
func ruleTarget(dir, name string) (string, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		name = "systemprompt.md"
	}
	switch {
	case name != filepath.Base(name) || strings.ContainsAny(name, `/\`) || name == "." || name == "..":
		return "", fmt.Errorf("rule target %q: only a file name inside the prompts dir is allowed", name)
	case strings.ToLower(filepath.Ext(name)) != ".md":
		return "", fmt.Errorf("rule target %q: only .md files take rules", name)
	}
	p := filepath.Join(dir, name)
	// A symlink planted in the prompts dir must not lead outside it.
	if fi, err := os.Lstat(p); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		return "", fmt.Errorf("rule target %q is a symbolic link: refused", name)
	}
	return p, nil
}

// normalize makes rules comparable: case, spacing, list markers and final
// punctuation do not make a rule new.
func normalize(s string) string {
	s = strings.TrimSpace(s)
	s = strings.TrimLeft(s, "-*• \t")
	s = strings.ToLower(strings.Join(strings.Fields(s), " "))
	return strings.TrimRightFunc(s, func(r rune) bool { return unicode.IsPunct(r) || unicode.IsSpace(r) })
}

// hasRule reports whether text already holds rule, as a line.
func hasRule(text, rule string) bool {
	want := normalize(rule)
	for _, line := range strings.Split(text, "\n") {
		if normalize(line) == want {
			return true
		}
	}
	return false
}

// appendRule adds rule as a "- rule" line to path unless it is there; it
// reports whether it added it.
func appendRule(path, rule string) (bool, error) {
	rule = strings.Join(strings.Fields(rule), " ")
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return false, err
	}
	if hasRule(string(old), rule) {
		return false, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return false, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return false, err
	}
	line := "- " + rule + "\n"
	if len(old) > 0 && old[len(old)-1] != '\n' {
		line = "\n" + line
	}
	if _, err := f.WriteString(line); err != nil {
		f.Close()
		return false, err
	}
	return true, f.Close()
}
