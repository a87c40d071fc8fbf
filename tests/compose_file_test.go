package tests

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]yaml.Node      `yaml:"volumes"`
}

// composeService holds the keys the checks read; ports and volumes in
// Compose's short syntax.
type composeService struct {
	Image       string           `yaml:"image"`
	Build       yaml.Node        `yaml:"build"`
	Profiles    []string         `yaml:"profiles"`
	Ports       []string         `yaml:"ports"`
	Environment composeEnv       `yaml:"environment"`
	DependsOn   composeDependsOn `yaml:"depends_on"`
	Healthcheck yaml.Node        `yaml:"healthcheck"`
	Volumes     []string         `yaml:"volumes"`
}

// composeEnv is a service's environment as written (before
// interpolation), from either of Compose's forms: a mapping, or a list of
// NAME=value.
type composeEnv map[string]string

func (e *composeEnv) UnmarshalYAML(n *yaml.Node) error {
	*e = composeEnv{}
	switch n.Kind {
	case yaml.MappingNode:
		var m map[string]*string
		if err := n.Decode(&m); err != nil {
			return err
		}
		for k, v := range m {
			if v != nil {
				(*e)[k] = *v
			} else {
				(*e)[k] = ""
			}
		}
	case yaml.SequenceNode:
		var list []string
		if err := n.Decode(&list); err != nil {
			return err
		}
		for _, kv := range list {
			k, v, _ := strings.Cut(kv, "=")
			(*e)[k] = v
		}
	default:
		return fmt.Errorf("line %d: environment is neither a mapping nor a list", n.Line)
	}
	return nil
}

func (d *composeDependsOn) UnmarshalYAML(n *yaml.Node) error {
	*d = composeDependsOn{}
	switch n.Kind {
	case yaml.SequenceNode:
		var list []string
		if err := n.Decode(&list); err != nil {
			return err
		}
		for _, s := range list {
			(*d)[s] = "service_started"
		}
	case yaml.MappingNode:
		var m map[string]struct {
			Condition string `yaml:"condition"`
		}
		if err := n.Decode(&m); err != nil {
			return err
		}
		for s, v := range m {
			(*d)[s] = cmp.Or(v.Condition, "service_started")
		}
	default:
		return fmt.Errorf("line %d: depends_on is neither a list nor a mapping", n.Line)
	}
	return nil
}

// composeDependsOn maps each service depended on to the condition waited
// for, from either of Compose's forms (a plain list waits for the start).
type composeDependsOn map[string]string

// buildContext is the directory a service is built from ("" when it is
// not built).
func (s composeService) buildContext() string {
	switch s.Build.Kind {
	case yaml.ScalarNode:
		return s.Build.Value
	case yaml.MappingNode:
		var b struct {
			Context string `yaml:"context"`
		}
		if s.Build.Decode(&b) == nil {
			return cmp.Or(b.Context, ".")
		}
	}
	return ""
}

func loadCompose(t *testing.T, path string) composeFile {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var c composeFile
	require.NoError(t, yaml.Unmarshal(raw, &c), "parse %s", path)
	return c
}

func readDockerfile(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "Dockerfile"))
	require.NoError(t, err)
	return string(raw)
}

// composeInterpolate expands ${NAME}, ${NAME:-default}, ${NAME-default},
// ${NAME:?message}, ${NAME?message}, ${NAME:+alt}, ${NAME+alt}, $NAME and
// $$ as Compose does (not nested), looking variables up in lookup.
func composeInterpolate(s string, lookup func(string) (string, bool)) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch next := s[i+1]; {
		case next == '$':
			b.WriteByte('$')
			i++
		case next == '{':
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return "", fmt.Errorf("%q: ${ without }", s)
			}
			v, err := composeExpand(s[i+2:i+end], lookup)
			if err != nil {
				return "", err
			}
			b.WriteString(v)
			i += end
		default:
			j := i + 1
			for j < len(s) && (s[j] == '_' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= 'a' && s[j] <= 'z' || j > i+1 && s[j] >= '0' && s[j] <= '9') {
				j++
			}
			if j == i+1 {
				b.WriteByte('$')
				continue
			}
			v, _ := lookup(s[i+1 : j])
			b.WriteString(v)
			i = j - 1
		}
	}
	return b.String(), nil
}

func composeExpand(expr string, lookup func(string) (string, bool)) (string, error) {
	k := strings.IndexAny(expr, ":-?+")
	if k < 0 {
		v, _ := lookup(expr)
		return v, nil
	}
	name, rest := expr[:k], expr[k:]
	v, set := lookup(name)
	colon := strings.HasPrefix(rest, ":")
	rest = strings.TrimPrefix(rest, ":")
	if rest == "" {
		return "", fmt.Errorf("${%s}: no operator", expr)
	}
	missing := !set || colon && v == ""
	switch op, arg := rest[0], rest[1:]; op {
	case '-':
		if missing {
			return arg, nil
		}
		return v, nil
	case '?':
		if missing {
			return "", fmt.Errorf("${%s}: %s is required (%s)", expr, name, arg)
		}
		return v, nil
	case '+':
		if missing {
			return "", nil
		}
		return arg, nil
	default:
		return "", fmt.Errorf("${%s}: unknown operator %q", expr, op)
	}
}
