package config

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func writeFile(t *testing.T, dir, text string) string {
	t.Helper()
	p := filepath.Join(dir, "config.toml")
	require.NoError(t, os.WriteFile(p, []byte(text), 0o600))
	return p
}

func TestLoadDefaultsWhenNoFile(t *testing.T) {
	cfg, err := Load(Flags{}, envOf(map[string]string{"VERA_CONFIG_DIR": t.TempDir()}))
	require.NoError(t, err)
	assert.Empty(t, cfg.Path)
	assert.Equal(t, "127.0.0.1:11434", cfg.Server.Listen)
	assert.Equal(t, "http://127.0.0.1:11435", cfg.General.OllamaHost)
	assert.Equal(t, "", cfg.General.QdrantHost)
	assert.Equal(t, "memories", cfg.General.QdrantCollection)
	assert.Equal(t, "nomic-embed-text", cfg.General.EmbeddingModel)
	assert.Equal(t, "./data", cfg.Memory.DataDir)
	assert.Equal(t, "./prompts", cfg.Prompts.Dir)
	assert.Equal(t, "./logs", cfg.General.LogDir)
	assert.False(t, cfg.General.Debug)
	assert.Equal(t, "", cfg.Server.AdminToken)
	assert.Equal(t, "X-OpenWebUI-User-Id", cfg.Memory.NamespaceHeader)
	assert.Equal(t, 1500, cfg.Layers.SemanticTokenBudget)
	assert.Equal(t, 1500, cfg.Layers.ContextTokenBudget)
	assert.Equal(t, 0.5, cfg.Layers.SemanticScoreThreshold)
	assert.Equal(t, "02:00", cfg.Curator.RunTime)
	assert.Equal(t, "vera", cfg.Routing.VirtualModel)
	assert.Equal(t, "vera-deep", cfg.Routing.DeepModel)
	assert.True(t, cfg.Routing.AutoComplex)
	assert.Equal(t, 8192, cfg.VRAM.TotalMB)
	assert.Equal(t, 15*time.Second, cfg.VRAM.FlushTimeout.Duration)
	assert.Equal(t, 250*time.Millisecond, cfg.VRAM.PollInterval.Duration)
	assert.True(t, cfg.VRAM.Prewarm)
	assert.Equal(t, 1, cfg.VRAM.MaxLargeConcurrency)
	assert.Empty(t, cfg.Warnings)
}

func TestLoadPrecedence(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, `
[server]
listen = "127.0.0.1:9000"
[general]
ollama_host = "http://file:1"
embedding_model = "from-file"
debug = false
[memory]
data_dir = "/file/data"
`)
	tests := []struct {
		name       string
		env        map[string]string
		flags      Flags
		listen     string
		ollama     string
		embedModel string
		dataDir    string
		debug      bool
	}{
		{
			name:   "file over defaults",
			env:    map[string]string{"VERA_CONFIG_DIR": dir},
			listen: "127.0.0.1:9000", ollama: "http://file:1", embedModel: "from-file", dataDir: "/file/data",
		},
		{
			name: "env over file",
			env: map[string]string{
				"VERA_CONFIG_DIR": dir, "VERA_LISTEN": "127.0.0.1:9001", "VERA_OLLAMA_URL": "http://env:2",
				"VERA_EMBEDDING_MODEL": "from-env", "VERA_DATA_DIR": "/env/data", "VERA_DEBUG": "true",
			},
			listen: "127.0.0.1:9001", ollama: "http://env:2", embedModel: "from-env", dataDir: "/env/data", debug: true,
		},
		{
			name: "flags over env",
			env: map[string]string{
				"VERA_CONFIG_DIR": dir, "VERA_LISTEN": "127.0.0.1:9001", "VERA_OLLAMA_URL": "http://env:2",
				"VERA_DATA_DIR": "/env/data",
			},
			flags:  Flags{Listen: "127.0.0.1:9002", OllamaURL: "http://flag:3", DataDir: "/flag/data", Debug: true},
			listen: "127.0.0.1:9002", ollama: "http://flag:3", embedModel: "from-file", dataDir: "/flag/data", debug: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Load(tt.flags, envOf(tt.env))
			require.NoError(t, err)
			assert.Equal(t, filepath.Join(dir, "config.toml"), cfg.Path)
			assert.Equal(t, tt.listen, cfg.Server.Listen)
			assert.Equal(t, tt.ollama, cfg.General.OllamaHost)
			assert.Equal(t, tt.embedModel, cfg.General.EmbeddingModel)
			assert.Equal(t, tt.dataDir, cfg.Memory.DataDir)
			assert.Equal(t, tt.debug, cfg.General.Debug)
		})
	}
}

func TestLoadEveryEnvVariable(t *testing.T) {
	env := map[string]string{
		"VERA_CONFIG_DIR":        t.TempDir(),
		"VERA_LISTEN":            "0.0.0.0:1",
		"VERA_OLLAMA_URL":        "http://o:2",
		"VERA_QDRANT_URL":        "http://q:6333",
		"VERA_QDRANT_COLLECTION": "c",
		"VERA_EMBEDDING_MODEL":   "e",
		"VERA_DATA_DIR":          "/d",
		"VERA_PROMPTS_DIR":       "/p",
		"VERA_LOG_DIR":           "/l",
		"VERA_DEBUG":             "1",
		"VERA_ADMIN_TOKEN":       "tok",
	}
	cfg, err := Load(Flags{}, envOf(env))
	require.NoError(t, err)
	assert.Equal(t, "0.0.0.0:1", cfg.Server.Listen)
	assert.Equal(t, "http://o:2", cfg.General.OllamaHost)
	assert.Equal(t, "http://q:6333", cfg.General.QdrantHost)
	assert.Equal(t, "c", cfg.General.QdrantCollection)
	assert.Equal(t, "e", cfg.General.EmbeddingModel)
	assert.Equal(t, "/d", cfg.Memory.DataDir)
	assert.Equal(t, "/p", cfg.Prompts.Dir)
	assert.Equal(t, "/l", cfg.General.LogDir)
	assert.True(t, cfg.General.Debug)
	assert.Equal(t, "tok", cfg.Server.AdminToken)
}

func TestLoadExplicitPathMustExist(t *testing.T) {
	_, err := Load(Flags{ConfigPath: filepath.Join(t.TempDir(), "nope.toml")}, envOf(nil))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "nope.toml")
}

// A Vera-AI config.toml, exactly as that project ships it, must load.
func TestParseVeraAIConfig(t *testing.T) {
	cfg, err := Parse([]byte(`[general]
ollama_host = "http://10.0.0.10:11434"
qdrant_host = "http://10.0.0.22:6333"
qdrant_collection = "memories"
embedding_model = "mxbai-embed-large"
debug = false

[layers]
semantic_token_budget = 25000
context_token_budget = 22000
semantic_search_turns = 2
semantic_score_threshold = 0.3
system_token_budget = 4000

[curator]
run_time = "02:00"
full_run_time = "03:00"
full_run_day = 1
curator_model = "gpt-oss:120b"

[cloud]
enabled = false
api_base = "https://openrouter.ai/api/v1"
api_key_env = "OPENROUTER_API_KEY"

[cloud.models]
"gpt-oss:120b" = "openai/gpt-oss-120b"
`))
	require.NoError(t, err)
	require.NoError(t, cfg.Validate())
	assert.Equal(t, "http://10.0.0.10:11434", cfg.General.OllamaHost)
	assert.Equal(t, "http://10.0.0.22:6333", cfg.General.QdrantHost)
	assert.Equal(t, "mxbai-embed-large", cfg.General.EmbeddingModel)
	assert.Equal(t, 25000, cfg.Layers.SemanticTokenBudget)
	assert.Equal(t, 22000, cfg.Layers.ContextTokenBudget)
	assert.Equal(t, 0.3, cfg.Layers.SemanticScoreThreshold)
	assert.Equal(t, "gpt-oss:120b", cfg.Curator.CuratorModel)
	assert.Equal(t, map[string]string{"gpt-oss:120b": "openai/gpt-oss-120b"}, cfg.Cloud.Models)
	require.Len(t, cfg.Warnings, 3)
	assert.Contains(t, cfg.Warnings[0], "semantic_search_turns")
	assert.Contains(t, cfg.Warnings[1], "system_token_budget")
	assert.Contains(t, cfg.Warnings[2], "full_run_time")
}

func TestParseErrorsNameKeyAndLine(t *testing.T) {
	tests := []struct {
		name string
		text string
		want []string
	}{
		{"unknown key", "[general]\ndebug = true\nollama_hots = \"x\"\n", []string{`"general.ollama_hots"`, "line 3"}},
		{"unknown section", "[server]\nlisten = \"127.0.0.1:1\"\n\n[nope]\nx = 1\n", []string{`"nope`, "line 4"}},
		{"wrong type", "[layers]\n\nsemantic_token_budget = \"lots\"\n", []string{"semantic_token_budget", "line 3"}},
		{"bad duration", "[vram]\nflush_timeout = \"soon\"\n", []string{"flush_timeout", "line 2", "invalid duration"}},
		{"syntax", "[general\n", []string{"line 1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.text))
			require.Error(t, err)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestLoadReportsFileInError(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "[general]\nbogus = 1\n")
	_, err := Load(Flags{}, envOf(map[string]string{"VERA_CONFIG_DIR": dir}))
	require.Error(t, err)
	assert.Contains(t, err.Error(), p)
	assert.Contains(t, err.Error(), `"general.bogus" at line 2`)
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"listen without port", func(c *Config) { c.Server.Listen = "localhost" }, "server.listen"},
		{"ollama scheme", func(c *Config) { c.General.OllamaHost = "ftp://x" }, "general.ollama_host"},
		{"negative budget", func(c *Config) { c.Layers.SemanticTokenBudget = -1 }, "layers.semantic_token_budget"},
		{"threshold range", func(c *Config) { c.Layers.SemanticScoreThreshold = 1.5 }, "semantic_score_threshold"},
		{"run time", func(c *Config) { c.Curator.RunTime = "25:00" }, "curator.run_time"},
		{"timezone", func(c *Config) { c.Curator.Timezone = "Mars/Olympus" }, "curator.timezone"},
		{"empty namespace header", func(c *Config) { c.Memory.NamespaceHeader = "" }, "memory.namespace_header"},
		{"vram concurrency", func(c *Config) { c.VRAM.MaxLargeConcurrency = 0 }, "vram.max_large_concurrency"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Default()
			tt.mutate(&cfg)
			err := cfg.Validate()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	cfg := Default()
	require.NoError(t, cfg.Validate())
}

func TestLoadBadDebugEnv(t *testing.T) {
	_, err := Load(Flags{}, envOf(map[string]string{"VERA_CONFIG_DIR": t.TempDir(), "VERA_DEBUG": "maybe"}))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "VERA_DEBUG")
}

func TestParseUpstream(t *testing.T) {
	tests := []struct{ in, want string }{
		{"http://127.0.0.1:11435", "http://127.0.0.1:11435"},
		{"127.0.0.1:11435", "http://127.0.0.1:11435"},
		{"http://ollama", "http://ollama:11434"},
		{"https://host:1/base/", "https://host:1/base"},
	}
	for _, tt := range tests {
		u, err := parseUpstream(tt.in, "11434")
		require.NoError(t, err, tt.in)
		assert.Equal(t, tt.want, u.String())
	}
}

// config.example.toml documents every key with its default: it must parse,
// and parse to exactly the built-in defaults.
func TestExampleFileIsTheDefaults(t *testing.T) {
	data, err := os.ReadFile("../config.example.toml")
	require.NoError(t, err)
	cfg, err := Parse(data)
	require.NoError(t, err)
	want := Default()
	want.VRAM.LargeModels = []string{}
	assert.Equal(t, want, cfg)
}

func TestCuratorScheduleIsValidated(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "config.toml")
	require.NoError(t, os.WriteFile(p, []byte("[curator]\nschedule = \"every day\"\n"), 0o600))
	_, err := Load(Flags{ConfigPath: p}, func(string) string { return "" })
	require.Error(t, err)
	assert.Contains(t, err.Error(), `curator.schedule "every day"`)
}

// Load resolves the URLs, the time zone and the cron spec once, from
// whichever of the file, the environment and the flags set them.
func TestLoadResolves(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, `
[general]
ollama_host = "file:1"
qdrant_host = "http://qdrant.file"
[curator]
run_time = "03:30"
timezone = "Pacific/Auckland"
`)
	auckland, err := time.LoadLocation("Pacific/Auckland")
	require.NoError(t, err)
	tests := []struct {
		name          string
		env           map[string]string
		flags         Flags
		ollama, qdrnt string
	}{
		{name: "file", env: map[string]string{"VERA_CONFIG_DIR": dir},
			ollama: "http://file:1", qdrnt: "http://qdrant.file:6334"},
		{name: "env", env: map[string]string{"VERA_CONFIG_DIR": dir, "VERA_OLLAMA_URL": "host:1234", "VERA_QDRANT_URL": "https://qdrant.env:6333/"},
			ollama: "http://host:1234", qdrnt: "https://qdrant.env:6333"},
		{name: "flags", env: map[string]string{"VERA_CONFIG_DIR": dir, "VERA_OLLAMA_URL": "host:1234"},
			flags: Flags{OllamaURL: "https://flag"}, ollama: "https://flag:11434", qdrnt: "http://qdrant.file:6334"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Load(tt.flags, envOf(tt.env))
			require.NoError(t, err)
			require.NotNil(t, cfg.OllamaURL)
			assert.Equal(t, tt.ollama, cfg.OllamaURL.String())
			require.NotNil(t, cfg.QdrantURL)
			assert.Equal(t, tt.qdrnt, cfg.QdrantURL.String())
			assert.Equal(t, auckland, cfg.CuratorLocation)
			assert.Equal(t, "30 3 * * *", cfg.CuratorSpec)
		})
	}

	cfg, err := Load(Flags{}, envOf(map[string]string{"VERA_CONFIG_DIR": t.TempDir()}))
	require.NoError(t, err)
	assert.Equal(t, "http://127.0.0.1:11435", cfg.OllamaURL.String())
	assert.Nil(t, cfg.QdrantURL, "no qdrant_host: the embedded store")
	assert.Equal(t, time.Local, cfg.CuratorLocation)
	assert.Equal(t, "0 2 * * *", cfg.CuratorSpec)
}

// The curator's cron spec is curator.schedule when set, else
// curator.run_time every day; both are validated either way.
func TestCuratorSpec(t *testing.T) {
	for in, want := range map[[2]string]string{
		{"", "02:00"}:             "0 2 * * *",
		{"", "23:45"}:             "45 23 * * *",
		{"", "2:00"}:              "0 2 * * *",
		{"", "00:05"}:             "5 0 * * *",
		{"*/15 * * * *", "02:00"}: "*/15 * * * *",
		{"@daily", "02:00"}:       "@daily",
		{" @hourly ", "02:00"}:    "@hourly",
	} {
		cfg := Default()
		cfg.Curator.Schedule, cfg.Curator.RunTime = in[0], in[1]
		require.NoError(t, cfg.Validate(), in)
		assert.Equal(t, want, cfg.CuratorSpec, in)
	}
	for in, want := range map[[2]string]string{
		{"", "25:00"}:          "curator.run_time",
		{"", "02:5"}:           "curator.run_time",
		{"", "noon"}:           "curator.run_time",
		{"*/15 * * * *", "x"}:  "curator.run_time",
		{"every day", "02:00"}: `curator.schedule "every day"`,
	} {
		cfg := Default()
		cfg.Curator.Schedule, cfg.Curator.RunTime = in[0], in[1]
		err := cfg.Validate()
		require.Error(t, err, in)
		assert.Contains(t, err.Error(), want)
		assert.Empty(t, cfg.CuratorSpec, "a config that fails validation resolves nothing")
		assert.Nil(t, cfg.OllamaURL)
	}
}

// The two cloud configs of docs/cloud.md load; the key comes from the variable
// api_key_env names; mistakes are named.
func TestCloudConfig(t *testing.T) {
	load := func(toml string, env map[string]string) (Config, error) {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "config.toml"), []byte(toml), 0o600))
		if env == nil {
			env = map[string]string{}
		}
		env["VERA_CONFIG_DIR"] = dir
		return Load(Flags{}, envOf(env))
	}
	cfg, err := load(`[cloud]
enabled = true
api_base = "https://openrouter.ai/api/v1/"
api_key_env = "OPENROUTER_API_KEY"
fallback_model = "gpt-oss-big"
[cloud.models]
"gpt-oss-big" = "openai/gpt-oss-120b"
[cloud.headers]
"X-Title" = "vera"
`, map[string]string{"OPENROUTER_API_KEY": " sk-or-1 "})
	require.NoError(t, err)
	assert.Equal(t, "https://openrouter.ai/api/v1", cfg.CloudURL.String())
	assert.Equal(t, "sk-or-1", cfg.CloudKey)
	assert.Equal(t, "shareable", cfg.CloudMemory, "default: only memories not private leave")
	assert.Equal(t, 60*time.Second, cfg.Cloud.ResponseHeaderTimeout.Duration)
	assert.Equal(t, "vera", cfg.Cloud.Headers["X-Title"])
	for _, w := range cfg.Warnings {
		assert.NotContains(t, w, "cloud")
	}

	cfg, err = load("[cloud]\nenabled = true\napi_base = \"http://litellm.lan:4000/v1\"\napi_key_env = \"LITELLM_API_KEY\"\nresponse_header_timeout = \"120s\"\ninject_memory = false\n[cloud.models]\n\"deep\" = \"gpt-4o\"\n", nil)
	require.NoError(t, err)
	assert.Empty(t, cfg.CloudKey)
	assert.Equal(t, "none", cfg.CloudMemory, "the old key, set, keeps its meaning")

	for conf, want := range map[string]string{
		"[cloud]\ninject_memory = true\n":                         "all",
		"[cloud]\nmemory = \"none\"\n":                            "none",
		"[cloud]\nmemory = \"all\"\ninject_memory = false\n":      "all",
		"[cloud]\nmemory = \"shareable\"\ninject_memory = true\n": "all",
		"[cloud]\nmemory = \"none\"\ninject_memory = true\n":      "none",
	} {
		cfg, err = load(conf, nil)
		require.NoError(t, err, conf)
		assert.Equal(t, want, cfg.CloudMemory, conf)
	}
	for _, conf := range []string{"[cloud]\nmemory = \"some\"\n", "[memory.models]\n\"guest*\" = \"private\"\n", "[memory.models]\n\"[\" = \"none\"\n"} {
		_, err = load(conf, nil)
		assert.Error(t, err, conf)
	}
	cfg, err = load("[memory.models]\n\"guest*\" = \"none\"\n", nil)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"guest*": "none"}, cfg.Memory.Models)

	cfg, err = load("[cloud]\nenabled = false\napi_base = \"nonsense\"\n", map[string]string{"OPENROUTER_API_KEY": "sk"})
	require.NoError(t, err, "a disabled section is not checked")
	assert.Nil(t, cfg.CloudURL)
	assert.Empty(t, cfg.CloudKey, "nor its key read")

	for toml, want := range map[string]string{
		"[cloud]\nenabled = true\napi_base = \"openrouter.ai\"\n[cloud.models]\na = \"b\"\n":                                          "cloud.api_base",
		"[cloud]\nenabled = true\napi_base = \"https://user:secret@x.example/v1\"\n":                                                  "cloud.models",
		"[cloud]\nenabled = true\napi_base = \"https://x.example/v1\"\nresponse_header_timeout = \"0s\"\n[cloud.models]\na = \"b\"\n": "cloud.response_header_timeout",
	} {
		_, err := load(toml, nil)
		require.Error(t, err, toml)
		assert.Contains(t, err.Error(), want)
		assert.NotContains(t, err.Error(), "secret")
	}
}

// server.allowed_origins, when the file does not set it, is OLLAMA_ORIGINS
// from vera's environment; set (even empty), it wins; a pattern Ollama
// could not match is refused with the key named.
func TestAllowedOrigins(t *testing.T) {
	env := func(k string) string {
		if k == "OLLAMA_ORIGINS" {
			return " chrome-extension://*, https://app.example ,,"
		}
		return ""
	}
	load := func(toml string, getenv func(string) string) (Config, error) {
		dir := t.TempDir()
		p := filepath.Join(dir, "config.toml")
		require.NoError(t, os.WriteFile(p, []byte(toml), 0o600))
		return Load(Flags{ConfigPath: p}, getenv)
	}
	cfg, err := load("", env)
	require.NoError(t, err)
	assert.Equal(t, []string{"chrome-extension://*", "https://app.example"}, cfg.Server.AllowedOrigins)
	cfg, err = load("[server]\nallowed_origins = []\n", env)
	require.NoError(t, err)
	assert.Empty(t, cfg.Server.AllowedOrigins, "the file's empty list wins over the environment")
	cfg, err = load("[server]\nallowed_origins = [\"https://chat.example\"]\n", env)
	require.NoError(t, err)
	assert.Equal(t, []string{"https://chat.example"}, cfg.Server.AllowedOrigins)
	cfg, err = load("", func(string) string { return "" })
	require.NoError(t, err)
	assert.Empty(t, cfg.Server.AllowedOrigins)
	assert.Equal(t, "X-OpenWebUI-Chat-Id", cfg.Memory.ChatIDHeader)
	_, err = load("[server]\nallowed_origins = [\"https://*.*.example\"]\n", env)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "server.allowed_origins")
	_, err = load("[memory]\nchat_id_header = \"\"\n", env)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "memory.chat_id_header")
	assert.Equal(t, "keep", cfg.Memory.OpenWebUIMemory, "Open WebUI's memory is forwarded unless asked")
	cfg, err = load("[memory]\nopen_webui_memory = \"drop\"\n", env)
	require.NoError(t, err)
	assert.Equal(t, "drop", cfg.Memory.OpenWebUIMemory)
	_, err = load("[memory]\nopen_webui_memory = \"Drop it\"\n", env)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `memory.open_webui_memory: "Drop it" is not "keep"`)
}
