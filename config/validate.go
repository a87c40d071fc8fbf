package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Validate reports the first setting that vera cannot run with. When there
// is none, it sets the resolved fields from the settings.
func (c *Config) Validate() error {
	ollamaURL, qdrantURL, err := c.validateUpstreams()
	if err != nil {
		return err
	}
	for _, check := range []func() error{c.validateServer, c.validateMemory, c.checkRoutingRules, c.validateVRAM} {
		if err := check(); err != nil {
			return err
		}
	}
	loc, spec, err := c.validateCurator()
	if err != nil {
		return err
	}
	cloudURL, err := c.validateCloud()
	if err != nil {
		return err
	}
	if c.CloudMemory, err = c.validatePolicies(); err != nil {
		return err
	}
	c.OllamaURL, c.QdrantURL, c.CloudURL = ollamaURL, qdrantURL, cloudURL
	c.CuratorLocation, c.CuratorSpec = loc, spec
	return nil
}

// validateUpstreams parses Ollama's and Qdrant's addresses (nil: the
// embedded store).
func (c *Config) validateUpstreams() (ollamaURL, qdrantURL *url.URL, err error) {
	if ollamaURL, err = parseUpstream(c.General.OllamaHost, "11434"); err != nil {
		return nil, nil, fmt.Errorf("general.ollama_host: %w", err)
	}
	if c.General.QdrantHost != "" {
		if qdrantURL, err = parseUpstream(c.General.QdrantHost, "6334"); err != nil {
			return nil, nil, fmt.Errorf("general.qdrant_host: %w", err)
		}
	}
	if c.General.QdrantCollection == "" {
		return nil, nil, errors.New("general.qdrant_collection: must not be empty")
	}
	if c.General.ResponseHeaderTimeout.Duration <= 0 {
		return nil, nil, errors.New("general.response_header_timeout: must be positive")
	}
	return ollamaURL, qdrantURL, nil
}

// validateServer checks the listener's settings.
func (c *Config) validateServer() error {
	if err := validateHostPort(c.Server.Listen); err != nil {
		return fmt.Errorf("server.listen: %w", err)
	}
	if c.Server.ShutdownTimeout.Duration < 0 {
		return errors.New("server.shutdown_timeout: must not be negative")
	}
	if c.Server.BodyIdleTimeout.Duration <= 0 {
		return errors.New("server.body_idle_timeout: must be positive")
	}
	return checkOrigins(c.Server.AllowedOrigins)
}

// validateMemory checks [memory] and the budgets of [layers].
func (c *Config) validateMemory() error {
	if c.Memory.RequireIdentity && c.Memory.JWTSecret == "" {
		return errors.New("memory.require_identity: needs memory.jwt_secret (VERA_JWT_SECRET), the secret Open WebUI signs its user tokens with (FORWARD_USER_INFO_HEADER_JWT_SECRET)")
	}
	for key, v := range map[string]int{
		"layers.semantic_token_budget": c.Layers.SemanticTokenBudget,
		"layers.context_token_budget":  c.Layers.ContextTokenBudget,
		"layers.recent_turns":          c.Layers.RecentTurns,
		"layers.rules_token_budget":    c.Layers.RulesTokenBudget,
		"layers.profile_token_budget":  c.Layers.ProfileTokenBudget,
	} {
		if v < 0 {
			return fmt.Errorf("%s: must not be negative, got %d", key, v)
		}
	}
	if t := c.Layers.SemanticScoreThreshold; t < 0 || t > 1 {
		return fmt.Errorf("layers.semantic_score_threshold: must be between 0 and 1, got %g", t)
	}
	if c.Memory.CompactAt < 0 || c.Memory.CompactAt > 1 {
		return fmt.Errorf("memory.compact_at: a share of the context window between 0 (never compact) and 1, got %g", c.Memory.CompactAt)
	}
	if c.Memory.MaxTurnTokens < 64 {
		return fmt.Errorf("memory.max_turn_tokens: must be at least 64, got %d", c.Memory.MaxTurnTokens)
	}
	if c.Memory.NamespaceHeader == "" {
		return errors.New("memory.namespace_header: must not be empty")
	}
	if c.Memory.ChatIDHeader == "" {
		return errors.New("memory.chat_id_header: must not be empty")
	}
	switch c.Memory.OpenWebUIMemory {
	case "keep", "drop":
	default:
		return fmt.Errorf("memory.open_webui_memory: %q is not \"keep\" (forward Open WebUI's own memories) or \"drop\" (remove them)", c.Memory.OpenWebUIMemory)
	}
	return nil
}

// validateCurator resolves the curator's time zone and cron spec.
func (c *Config) validateCurator() (*time.Location, string, error) {
	runTime, err := parseClock(c.Curator.RunTime)
	if err != nil {
		return nil, "", fmt.Errorf("curator.run_time: %w", err)
	}
	schedule := strings.TrimSpace(c.Curator.Schedule)
	if schedule != "" {
		if _, err := cron.ParseStandard(schedule); err != nil {
			return nil, "", fmt.Errorf("curator.schedule %q: %w", schedule, err)
		}
	}
	loc := time.Local
	if c.Curator.Timezone != "" {
		if loc, err = time.LoadLocation(c.Curator.Timezone); err != nil {
			return nil, "", fmt.Errorf("curator.timezone: %w", err)
		}
	}
	return loc, curatorSpec(schedule, runTime), nil
}

// validateVRAM checks [vram] and routing's margin.
func (c *Config) validateVRAM() error {
	if m := c.Routing.Margin; m < 0 || m > 1 {
		return fmt.Errorf("routing.margin: must be between 0 and 1, got %g", m)
	}
	if c.VRAM.TotalMB <= 0 {
		return fmt.Errorf("vram.total_mb: must be positive, got %d", c.VRAM.TotalMB)
	}
	if c.VRAM.FlushTimeout.Duration <= 0 || c.VRAM.PollInterval.Duration <= 0 {
		return errors.New("vram.flush_timeout and vram.poll_interval: must be positive")
	}
	if c.VRAM.MaxLargeConcurrency < 1 {
		return fmt.Errorf("vram.max_large_concurrency: must be at least 1, got %d", c.VRAM.MaxLargeConcurrency)
	}
	return nil
}

// validateCloud checks [cloud] and returns its base URL; nil when the
// cloud is off.
func (c *Config) validateCloud() (*url.URL, error) {
	if !c.Cloud.Enabled {
		return nil, nil
	}
	u, err := url.Parse(strings.TrimRight(strings.TrimSpace(c.Cloud.APIBase), "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("cloud.api_base: want an http(s) URL such as https://openrouter.ai/api/v1, got %q", RedactURL(c.Cloud.APIBase))
	}
	if len(c.Cloud.Models) == 0 && c.Cloud.FallbackModel == "" {
		return nil, errors.New("cloud.models: name at least one model, as \"name\" = \"provider/model\"")
	}
	for name, m := range c.Cloud.Models {
		if strings.TrimSpace(name) == "" || strings.TrimSpace(m) == "" {
			return nil, fmt.Errorf("cloud.models: %q = %q: neither side may be empty", name, m)
		}
	}
	if c.Cloud.ResponseHeaderTimeout.Duration <= 0 {
		return nil, errors.New("cloud.response_header_timeout: must be positive")
	}
	return u, nil
}

// policies are what a model may be sent of memory.
var policies = []string{"all", "shareable", "none"}

// validatePolicies checks cloud.memory and [memory.models], and resolves
// what cloud models are sent: cloud.memory, unless it is the default
// ("shareable") and the old cloud.inject_memory is set (true: all, false:
// none).
func (c *Config) validatePolicies() (string, error) {
	for pattern, p := range c.Memory.Models {
		if _, err := path.Match(pattern, ""); err != nil || strings.TrimSpace(pattern) == "" {
			return "", fmt.Errorf("memory.models: %q is not a model name pattern (such as \"guest*\" or \"*-cloud\")", pattern)
		}
		if !slices.Contains(policies, p) {
			return "", fmt.Errorf("memory.models: %q = %q: want \"all\", \"shareable\" or \"none\"", pattern, p)
		}
	}
	if !slices.Contains(policies, c.Cloud.Memory) {
		return "", fmt.Errorf("cloud.memory: %q: want \"all\", \"shareable\" (only memories not private) or \"none\"", c.Cloud.Memory)
	}
	switch {
	case c.Cloud.InjectMemory == nil || c.Cloud.Memory != "shareable":
		return c.Cloud.Memory, nil
	case *c.Cloud.InjectMemory:
		return "all", nil
	}
	return "none", nil
}

// curatorSpec is the cron spec of a validated schedule: the schedule when
// set, else runTime (since midnight) every day.
func curatorSpec(schedule string, runTime time.Duration) string {
	if schedule != "" {
		return schedule
	}
	h, m := int(runTime/time.Hour), int(runTime%time.Hour/time.Minute)
	return fmt.Sprintf("%d %d * * *", m, h)
}

// parseClock parses "HH:MM" (24-hour) into hours and minutes since midnight.
func parseClock(s string) (time.Duration, error) {
	t, err := time.Parse("15:04", s)
	if err != nil {
		return 0, fmt.Errorf("want HH:MM (24-hour), got %q", s)
	}
	return time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute, nil
}

// parseUpstream parses an upstream address. A bare "host:port" is taken as
// http; a missing port gets defaultPort.
func parseUpstream(raw, defaultPort string) (*url.URL, error) {
	s := strings.TrimSpace(raw)
	if s == "" {
		return nil, errors.New("must not be empty")
	}
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("invalid URL %q: %w", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("invalid URL %q: scheme must be http or https", raw)
	}
	if u.Hostname() == "" {
		return nil, fmt.Errorf("invalid URL %q: no host", raw)
	}
	if u.Port() == "" {
		u.Host = net.JoinHostPort(u.Hostname(), defaultPort)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	return u, nil
}

func validateHostPort(s string) error {
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("want host:port, got %q", s)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("invalid port in %q", s)
	}
	return nil
}

// checkRoutingRules compiles [routing.rules], so that a bad expression
// stops vera at start with the key and the expression named.
func (c *Config) checkRoutingRules() error {
	for tier, rules := range map[string][]string{"light": c.Routing.Rules.Light, "medium": c.Routing.Rules.Medium, "complex": c.Routing.Rules.Complex} {
		for _, r := range rules {
			if _, err := regexp.Compile(r); err != nil {
				return fmt.Errorf("routing.rules.%s: %q is not a regular expression: %v", tier, r, err)
			}
		}
	}
	return nil
}
