package prompts

import (
	"path/filepath"
	"strings"
)

// LegacyRulesWarning is shown with LegacyRules' path and count.
const LegacyRulesWarning = "systemprompt.md holds \"- \" lines: earlier versions of vera's curator appended one user's rules there, " +
	"and there they apply to every user's chats; move them elsewhere or delete them"

// LegacyRules counts the "- " lines of systemprompt.md in the prompts dir:
// earlier versions of vera's curator appended rules learnt from one user
// there, where they reach every user. A heuristic: a person may write such
// lines too, so it is a warning.
func LegacyRules(dir string) (path string, n int) {
	for _, line := range strings.Split(New(dir).System(), "\n") {
		if strings.HasPrefix(line, "- ") {
			n++
		}
	}
	return filepath.Join(dir, SystemPrompt), n
}
