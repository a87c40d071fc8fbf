// Package prompts reads vera's prompt files (systemprompt.md and the
// curator's prompt) from the prompts directory, picking up edits without a
// restart. Defaults for both ship in the binary; a file in the directory
// overrides its default.
package prompts

import (
	"embed"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// SystemPrompt is the file whose text joins the system layer of every chat.
const SystemPrompt = "systemprompt.md"

// CuratorPrompt is the curator's instructions; {CURRENT_DATE} is filled in.
const CuratorPrompt = "curator_prompt.md"

// MemoryCommands lists the phrases that ask vera to remember or forget at
// once; a file in the directory adds to the built-in ones.
const MemoryCommands = "memory_commands.md"

//go:embed defaults/*.md defaults/tiers/*.txt
var defaults embed.FS

// Default returns the built-in text of name ("" when there is none).
func Default(name string) string {
	b, err := defaults.ReadFile("defaults/" + name)
	if err != nil {
		return ""
	}
	return string(b)
}

// Dir is a prompts directory. Reads are cached and re-done when a file's
// size or modification time changes, so an edit applies to the next chat.
type Dir struct {
	path string

	mu    sync.Mutex
	cache map[string]entry
}

type entry struct {
	mod  time.Time
	size int64
	text string
}

// New returns the prompts directory at path.
func New(path string) *Dir {
	return &Dir{path: path, cache: map[string]entry{}}
}

// Path returns the directory.
func (d *Dir) Path() string { return d.path }

// Read returns the text of name: the file's, or the built-in default when
// the file does not exist or cannot be read.
func (d *Dir) Read(name string) string {
	p := filepath.Join(d.path, name)
	fi, err := os.Stat(p)
	if err != nil {
		return Default(name)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if e, ok := d.cache[name]; ok && e.mod.Equal(fi.ModTime()) && e.size == fi.Size() {
		return e.text
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return Default(name)
	}
	d.cache[name] = entry{mod: fi.ModTime(), size: fi.Size(), text: string(b)}
	return string(b)
}

// System returns systemprompt.md.
func (d *Dir) System() string { return d.Read(SystemPrompt) }

// Curator returns curator_prompt.md.
func (d *Dir) Curator() string { return d.Read(CuratorPrompt) }

// TierFiles are the example utterances of each routing tier, under tiers/.
var TierFiles = map[string]string{"light": "tiers/light.txt", "medium": "tiers/medium.txt", "complex": "tiers/complex.txt"}

// Tiers returns the example utterances of each routing tier: one a line,
// blank lines and lines starting with # left out.
func (d *Dir) Tiers() map[string][]string {
	out := map[string][]string{}
	for t, name := range TierFiles {
		for _, line := range strings.Split(d.Read(name), "\n") {
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
				out[t] = append(out[t], line)
			}
		}
	}
	return out
}

// Commands returns the memory command phrases: the built-in ones, then
// the operator's file's, if there is one.
func (d *Dir) Commands() string {
	own := d.Read(MemoryCommands)
	def := Default(MemoryCommands)
	if own == def {
		return def
	}
	return def + "\n" + own
}
