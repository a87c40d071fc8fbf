package app

import (
	"runtime/debug"
)

// stamped is the version a build sets with
// -ldflags "-X github.com/vera-proxy/vera/app.stamped=v1.2.3"; empty
// otherwise.
var stamped string

// devVersion is the version of a build that says nothing of its own.
const devVersion = "0.1.0-dev"

// Version is vera's version: the one stamped at link time, else the
// module's version when installed with go install (go install
// github.com/vera-proxy/vera@v1.2.3), else the commit it was built from
// (with -dirty when the tree had changes), else 0.1.0-dev.
func Version() string {
	if stamped != "" {
		return stamped
	}
	info, _ := debug.ReadBuildInfo()
	return versionOf(info)
}

// versionOf reads the version from a binary's build info (nil: none).
func versionOf(info *debug.BuildInfo) string {
	if info == nil {
		return devVersion
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var revision string
	modified := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if revision == "" {
		return devVersion
	}
	if len(revision) > 12 {
		revision = revision[:12]
	}
	if modified {
		revision += "-dirty"
	}
	return revision
}
