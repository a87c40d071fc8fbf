package app

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The version is the module's when installed with go install, else the
// commit built from (-dirty with changes), else 0.1.0-dev.
func TestVersionOf(t *testing.T) {
	vcs := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	tests := []struct {
		name string
		info *debug.BuildInfo
		want string
	}{
		{"no build info", nil, "0.1.0-dev"},
		{"go install", &debug.BuildInfo{Main: debug.Module{Version: "v1.4.2"},
			Settings: vcs("vcs.revision", "0123456789abcdef0123")}, "v1.4.2"},
		{"a checkout", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"},
			Settings: vcs("vcs.revision", "0123456789abcdef0123", "vcs.modified", "false")}, "0123456789ab"},
		{"a checkout with changes", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"},
			Settings: vcs("vcs.revision", "0123456789abcdef0123", "vcs.modified", "true")}, "0123456789ab-dirty"},
		{"no vcs", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "0.1.0-dev"},
		{"no version at all", &debug.BuildInfo{}, "0.1.0-dev"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, versionOf(tt.info))
		})
	}
}
