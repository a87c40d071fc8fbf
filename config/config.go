// Package config turns the TOML file, the environment and command-line flags
// into plain structs, in that order of precedence (flags win), and validates
// the result. No other package reads the environment.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"
)

// Config is vera's whole configuration. The TOML keys are part of the
// product contract; a Vera-AI config.toml decodes into it as is.
type Config struct {
	General General `toml:"general"`
	Server  Server  `toml:"server"`
	Layers  Layers  `toml:"layers"`
	Memory  Memory  `toml:"memory"`
	Curator Curator `toml:"curator"`
	Prompts Prompts `toml:"prompts"`
	Cloud   Cloud   `toml:"cloud"`
	Routing Routing `toml:"routing"`
	VRAM    VRAM    `toml:"vram"`

	// QdrantAPIKey is Qdrant's API key, from VERA_QDRANT_API_KEY only (a
	// secret stays out of config files).
	QdrantAPIKey string `toml:"-"`

	// Resolved values, set by Validate (and so by Load) from the settings
	// above: every other package uses these, and nothing parses the
	// settings again.

	// OllamaURL is general.ollama_host as a URL: http when no scheme was
	// given, port 11434 when none was, no trailing slash.
	OllamaURL *url.URL `toml:"-"`
	// QdrantURL is general.qdrant_host as a URL (port 6334 when none was
	// given); nil means the embedded store.
	QdrantURL *url.URL `toml:"-"`
	// CuratorLocation is curator.timezone; time.Local when it is empty.
	CuratorLocation *time.Location `toml:"-"`
	// CloudURL is cloud.api_base, without a trailing slash; nil unless
	// the cloud is enabled. CloudKey is the API key read from the variable
	// cloud.api_key_env names ("" when unset): a secret, never shown.
	CloudURL *url.URL `toml:"-"`
	CloudKey string   `toml:"-"`
	// CloudMemory is cloud.memory resolved: what cloud models are sent of
	// memory ("all", "shareable" or "none"), cloud.inject_memory when
	// only that is set.
	CloudMemory string `toml:"-"`
	// CuratorSpec is the curator's cron spec: curator.schedule when set (a
	// standard 5-field spec or a descriptor such as @daily), else
	// curator.run_time every day ("0 2 * * *" for "02:00").
	CuratorSpec string `toml:"-"`

	// Path is the file the config was read from; empty when none existed.
	Path string `toml:"-"`
	// Warnings are non-fatal remarks about the input (keys accepted for
	// Vera-AI compatibility but ignored, sections not active yet).
	Warnings []string `toml:"-"`
}

// General holds the upstreams and process-wide switches.
type General struct {
	OllamaHost       string `toml:"ollama_host"`
	QdrantHost       string `toml:"qdrant_host"`
	QdrantCollection string `toml:"qdrant_collection"`
	EmbeddingModel   string `toml:"embedding_model"`
	LogDir           string `toml:"log_dir"`
	Debug            bool   `toml:"debug"`
	// ResponseHeaderTimeout bounds the wait for Ollama's response headers.
	// Ollama sends them only once the model is loaded (its own load timeout
	// is 5 minutes), so this must be generous; streams themselves have no
	// time limit.
	ResponseHeaderTimeout Duration `toml:"response_header_timeout"`
}

// Server is vera's own listener.
type Server struct {
	Listen          string   `toml:"listen"`
	AdminToken      string   `toml:"admin_token"`
	ShutdownTimeout Duration `toml:"shutdown_timeout"`
	// APIKeys, when set, are required of every client but loopback ones
	// (while TrustLoopback), on every route but /healthz and /metrics.
	// Env VERA_API_KEYS, comma-separated.
	APIKeys []string `toml:"api_keys"`
	// TrustLoopback serves loopback clients without an API key, and
	// without the admin token on admin routes.
	TrustLoopback bool `toml:"trust_loopback"`
	// AllowedOrigins are browser origins (patterns with at most one *)
	// allowed beside Ollama's own list; unset: OLLAMA_ORIGINS from vera's
	// environment, split at commas.
	AllowedOrigins []string `toml:"allowed_origins"`
	// BodyIdleTimeout ends a request whose body sends no byte for this
	// long; a body that keeps flowing is never cut.
	BodyIdleTimeout Duration `toml:"body_idle_timeout"`
}

// Layers are the token budgets of the injected context.
type Layers struct {
	SemanticTokenBudget    int     `toml:"semantic_token_budget"`
	ContextTokenBudget     int     `toml:"context_token_budget"`
	SemanticScoreThreshold float64 `toml:"semantic_score_threshold"`
	RecentTurns            int     `toml:"recent_turns"`
	// RulesTokenBudget bounds the namespace's curator rules in the system
	// layer.
	RulesTokenBudget int `toml:"rules_token_budget"`
	// ProfileTokenBudget bounds the namespace's profile in the system
	// layer, and the profile the curator writes.
	ProfileTokenBudget int `toml:"profile_token_budget"`

	// Vera-AI keys: accepted so its config loads, ignored with a warning.
	SemanticSearchTurns *int `toml:"semantic_search_turns"`
	SystemTokenBudget   *int `toml:"system_token_budget"`
}

// Memory scopes and stores what vera remembers.
type Memory struct {
	Enabled         bool   `toml:"enabled"`
	NamespaceHeader string `toml:"namespace_header"`
	// ChatIDHeader names the header holding Open WebUI's chat id (its
	// FORWARD_SESSION_INFO_HEADER_CHAT_ID).
	ChatIDHeader string `toml:"chat_id_header"`
	DataDir      string `toml:"data_dir"`
	// MaxTurnTokens caps a stored turn's text: a longer one keeps its head
	// and tail around a marker.
	MaxTurnTokens int `toml:"max_turn_tokens"`
	// CompactAt is the share of the model's context window past which a
	// conversation is compacted: its oldest turns summarised (0: never).
	CompactAt float64 `toml:"compact_at"`
	// SkipTasks leaves Open WebUI's background task prompts (titles, tags,
	// follow-ups...) out of memory.
	SkipTasks bool `toml:"skip_tasks"`
	// OpenWebUIMemory is what becomes of Open WebUI's own memory block
	// ("User Context:") in a chat's system message: "keep" forwards it,
	// "drop" removes it (for people whose memory is vera's now).
	OpenWebUIMemory string `toml:"open_webui_memory"`
	// StablePrefix keeps a conversation's injected layers byte-stable
	// across its turns, so Ollama's prompt cache holds (docs/conversations.md).
	StablePrefix bool `toml:"stable_prefix"`
	// JWTSecret verifies Open WebUI's X-OpenWebUI-User-Jwt (env
	// VERA_JWT_SECRET); RequireIdentity refuses requests without one.
	JWTSecret       string `toml:"jwt_secret"`
	RequireIdentity bool   `toml:"require_identity"`
	// Models sets, per model name glob ("guest*", "*-cloud"), what it is
	// sent of memory: "all", "shareable" or "none"; the longest matching
	// pattern wins, over cloud.memory too.
	Models map[string]string `toml:"models"`
}

// Curator schedules the distillation of raw turns.
type Curator struct {
	RunTime      string `toml:"run_time"`
	Schedule     string `toml:"schedule"`
	CuratorModel string `toml:"curator_model"`
	Timezone     string `toml:"timezone"`

	// Vera-AI keys: vera runs the monthly pass on the 1st at run_time.
	FullRunTime *string `toml:"full_run_time"`
	FullRunDay  *int    `toml:"full_run_day"`
}

// Prompts locates the system and curator prompt files.
type Prompts struct {
	Dir string `toml:"dir"`
}

// Cloud is an OpenAI-compatible upstream for some model names.
type Cloud struct {
	Enabled   bool   `toml:"enabled"`
	APIBase   string `toml:"api_base"`
	APIKeyEnv string `toml:"api_key_env"`
	// Models maps the Ollama-style names clients pick to cloud models.
	Models map[string]string `toml:"models"`
	// Headers are sent with every cloud request (OpenRouter's
	// HTTP-Referer and X-Title).
	Headers               map[string]string `toml:"headers"`
	ResponseHeaderTimeout Duration          `toml:"response_header_timeout"`
	// Memory is what cloud models (and Ollama's -cloud ones, and the
	// fallback) are sent of memory: "all", "shareable" (only memories not
	// private; the default) or "none".
	Memory string `toml:"memory"`
	// InjectMemory is the old switch, kept working when set: true is
	// "all", false "none". Set, it wins over Memory's default
	// ("shareable"), never over another Memory.
	InjectMemory *bool `toml:"inject_memory"`
	// FallbackModel, when set, serves chats for local models while Ollama
	// is unreachable: a name from Models, or a cloud model.
	FallbackModel string `toml:"fallback_model"`
}

// Routing maps a virtual model name to light, medium or complex tiers.
type Routing struct {
	Enabled      bool   `toml:"enabled"`
	VirtualModel string `toml:"virtual_model"`
	DeepModel    string `toml:"deep_model"`
	Light        string `toml:"light"`
	Medium       string `toml:"medium"`
	Complex      string `toml:"complex"`
	AutoComplex  bool   `toml:"auto_complex"`
	StripThink   bool   `toml:"strip_think"`
	// Margin: when the best two tiers' similarities are closer, medium.
	Margin float64 `toml:"margin"`
	// Rules are regular expressions per tier, added to the built-in ones.
	Rules RoutingRules `toml:"rules"`
}

// RoutingRules are [routing.rules].
type RoutingRules struct {
	Light   []string `toml:"light"`
	Medium  []string `toml:"medium"`
	Complex []string `toml:"complex"`
}

// VRAM manages a small GPU's memory around large models.
type VRAM struct {
	Enabled             bool     `toml:"enabled"`
	LargeModels         []string `toml:"large_models"`
	TotalMB             int      `toml:"total_mb"`
	FlushTimeout        Duration `toml:"flush_timeout"`
	PollInterval        Duration `toml:"poll_interval"`
	Prewarm             bool     `toml:"prewarm"`
	MaxLargeConcurrency int      `toml:"max_large_concurrency"`
}

// Duration is a time.Duration written in TOML as a string such as "15s".
type Duration struct{ time.Duration }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("invalid duration %q (want e.g. \"15s\", \"250ms\")", b)
	}
	d.Duration = v
	return nil
}

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// Default returns the built-in defaults.
func Default() Config {
	return Config{
		General: General{
			OllamaHost:            "http://127.0.0.1:11435",
			QdrantCollection:      "memories",
			EmbeddingModel:        "nomic-embed-text",
			LogDir:                "./logs",
			ResponseHeaderTimeout: Duration{10 * time.Minute},
		},
		Server: Server{
			Listen:          "127.0.0.1:11434",
			ShutdownTimeout: Duration{30 * time.Second},
			APIKeys:         []string{},
			TrustLoopback:   true,
			BodyIdleTimeout: Duration{60 * time.Second},
		},
		Layers: Layers{
			SemanticTokenBudget:    1500,
			ContextTokenBudget:     1500,
			SemanticScoreThreshold: 0.5,
			RecentTurns:            10,
			RulesTokenBudget:       500,
			ProfileTokenBudget:     200,
		},
		Memory: Memory{
			Enabled:         true,
			NamespaceHeader: "X-OpenWebUI-User-Id",
			ChatIDHeader:    "X-OpenWebUI-Chat-Id",
			DataDir:         "./data",
			MaxTurnTokens:   4096,
			CompactAt:       0.75,
			SkipTasks:       true,
			StablePrefix:    true,
			OpenWebUIMemory: "keep",
		},
		Curator: Curator{
			RunTime:      "02:00",
			CuratorModel: "llama3.1:8b",
		},
		Prompts: Prompts{Dir: "./prompts"},
		Cloud:   Cloud{APIKeyEnv: "OPENROUTER_API_KEY", ResponseHeaderTimeout: Duration{60 * time.Second}, Memory: "shareable"},
		Routing: Routing{
			VirtualModel: "vera",
			DeepModel:    "vera-deep",
			AutoComplex:  true,
			Margin:       0.05,
			Rules:        RoutingRules{Light: []string{}, Medium: []string{}, Complex: []string{}},
		},
		VRAM: VRAM{
			TotalMB:             8192,
			FlushTimeout:        Duration{15 * time.Second},
			PollInterval:        Duration{250 * time.Millisecond},
			Prewarm:             true,
			MaxLargeConcurrency: 1,
		},
	}
}

// Flags are the command-line settings that override everything else. An
// empty field leaves the value alone.
type Flags struct {
	ConfigPath string
	Listen     string
	OllamaURL  string
	DataDir    string
	Debug      bool
}

// Load reads the config file (flags.ConfigPath, else
// $VERA_CONFIG_DIR/config.toml, else ./config.toml; a missing file means
// defaults), applies the environment through getenv, then the flags, and
// validates the result, which sets the resolved fields (OllamaURL,
// QdrantURL, CuratorLocation, CuratorSpec).
func Load(flags Flags, getenv func(string) string) (Config, error) {
	cfg := Default()
	path, explicit := flags.ConfigPath, flags.ConfigPath != ""
	if !explicit {
		dir := getenv("VERA_CONFIG_DIR")
		if dir == "" {
			dir = "."
		}
		path = filepath.Join(dir, "config.toml")
	}
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := decode(data, &cfg); err != nil {
			return Config{}, fmt.Errorf("config %s: %w", path, err)
		}
		cfg.Path = path
	case errors.Is(err, os.ErrNotExist) && !explicit:
		// No file: defaults.
	default:
		return Config{}, fmt.Errorf("config: %w", err)
	}
	if err := applyEnv(&cfg, getenv); err != nil {
		return Config{}, err
	}
	if cfg.Server.AllowedOrigins == nil {
		// What a user who let a browser app reach Ollama has set: the
		// same app now reaches vera.
		cfg.Server.AllowedOrigins = splitList(getenv("OLLAMA_ORIGINS"))
	}
	if cfg.Cloud.Enabled && cfg.Cloud.APIKeyEnv != "" {
		cfg.CloudKey = strings.TrimSpace(getenv(cfg.Cloud.APIKeyEnv))
	}
	applyFlags(&cfg, flags)
	cfg.Warnings = append(cfg.Warnings, cfg.compatWarnings()...)
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// Parse decodes TOML text over the defaults without touching the
// environment. It is Load's decoding step, exposed for tests and tools; it
// does not validate, so the resolved fields stay unset until Validate.
func Parse(data []byte) (Config, error) {
	cfg := Default()
	if err := decode(data, &cfg); err != nil {
		return Config{}, err
	}
	cfg.Warnings = cfg.compatWarnings()
	return cfg, nil
}

func decode(data []byte, cfg *Config) error {
	dec := toml.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err := dec.Decode(cfg)
	if err == nil {
		return nil
	}
	var strict *toml.StrictMissingError
	if errors.As(err, &strict) {
		msgs := make([]string, 0, len(strict.Errors))
		for _, e := range strict.Errors {
			row, _ := e.Position()
			msgs = append(msgs, fmt.Sprintf("unknown key %q at line %d", strings.Join(e.Key(), "."), row))
		}
		return errors.New(strings.Join(msgs, "; "))
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		row, _ := de.Position()
		key := strings.Join(de.Key(), ".")
		if key == "" {
			return fmt.Errorf("line %d: %s", row, de.Error())
		}
		return fmt.Errorf("key %q at line %d: %s", key, row, de.Error())
	}
	return err
}

func applyEnv(cfg *Config, getenv func(string) string) error {
	str := map[string]*string{
		"VERA_LISTEN":            &cfg.Server.Listen,
		"VERA_OLLAMA_URL":        &cfg.General.OllamaHost,
		"VERA_QDRANT_URL":        &cfg.General.QdrantHost,
		"VERA_QDRANT_COLLECTION": &cfg.General.QdrantCollection,
		"VERA_EMBEDDING_MODEL":   &cfg.General.EmbeddingModel,
		"VERA_DATA_DIR":          &cfg.Memory.DataDir,
		"VERA_PROMPTS_DIR":       &cfg.Prompts.Dir,
		"VERA_LOG_DIR":           &cfg.General.LogDir,
		"VERA_ADMIN_TOKEN":       &cfg.Server.AdminToken,
		"VERA_QDRANT_API_KEY":    &cfg.QdrantAPIKey,
		"VERA_JWT_SECRET":        &cfg.Memory.JWTSecret,
	}
	for name, dst := range str {
		if v := getenv(name); v != "" {
			*dst = v
		}
	}
	if v := getenv("VERA_API_KEYS"); v != "" {
		cfg.Server.APIKeys = splitList(v)
	}
	if v := getenv("VERA_DEBUG"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("VERA_DEBUG=%q: want true or false", v)
		}
		cfg.General.Debug = b
	}
	return nil
}

// splitList splits a comma-separated value, dropping empty items; nil
// when none is left.
func splitList(v string) []string {
	var out []string
	for _, k := range strings.Split(v, ",") {
		if k = strings.TrimSpace(k); k != "" {
			out = append(out, k)
		}
	}
	return out
}

func applyFlags(cfg *Config, f Flags) {
	if f.Listen != "" {
		cfg.Server.Listen = f.Listen
	}
	if f.OllamaURL != "" {
		cfg.General.OllamaHost = f.OllamaURL
	}
	if f.DataDir != "" {
		cfg.Memory.DataDir = f.DataDir
	}
	if f.Debug {
		cfg.General.Debug = true
	}
}

func (c *Config) compatWarnings() []string {
	var w []string
	if c.Layers.SemanticSearchTurns != nil {
		w = append(w, "layers.semantic_search_turns is a Vera-AI key; vera ignores it (the semantic query always uses the last few messages)")
	}
	if c.Layers.SystemTokenBudget != nil {
		w = append(w, "layers.system_token_budget is a Vera-AI key; vera ignores it (the system layer is never truncated)")
	}
	if c.Cloud.InjectMemory != nil && c.Cloud.Memory == "shareable" {
		w = append(w, fmt.Sprintf("cloud.inject_memory = %t is the old key, and it decides: cloud models get %s of memory; set cloud.memory (\"all\", \"shareable\" or \"none\") instead", *c.Cloud.InjectMemory,
			map[bool]string{true: "all (private memories too)", false: "none"}[*c.Cloud.InjectMemory]))
	}
	if c.Curator.FullRunTime != nil || c.Curator.FullRunDay != nil {
		w = append(w, "curator.full_run_time and curator.full_run_day are Vera-AI keys; vera ignores them (the monthly pass runs on the 1st at curator.run_time)")
	}
	return w
}
