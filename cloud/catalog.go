package cloud

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Model is what the provider's /models says of a cloud model.
type Model struct {
	ID            string
	ContextLength int // DefaultContextLength when the provider gives none
	Tools         bool
	Thinking      bool
	Vision        bool
}

// catalogTTL is how long the provider's /models is kept; a failed fetch
// is tried again after failedTTL.
const (
	catalogTTL = 10 * time.Minute
	failedTTL  = 30 * time.Second
)

// Info returns what the provider says of the cloud model a name stands
// for. When /models cannot be read, the defaults: a 32768-token window,
// tools, no thinking, no vision.
func (p *Provider) Info(ctx context.Context, name string) Model {
	id, _ := p.Model(name)
	def := Model{ID: id, ContextLength: DefaultContextLength, Tools: true}
	cat, _ := p.models(ctx)
	if m, ok := cat[id]; ok {
		if m.ContextLength <= 0 {
			m.ContextLength = DefaultContextLength
		}
		return m
	}
	return def
}

// Listed reports whether the provider's /models lists the cloud model a
// name stands for.
func (p *Provider) Listed(ctx context.Context, name string) bool {
	id, _ := p.Model(name)
	cat, _ := p.models(ctx)
	_, ok := cat[id]
	return ok
}

// Window is the context window that sizes memory for a cloud name.
func (p *Provider) Window(ctx context.Context, name string) int {
	return p.Info(ctx, name).ContextLength
}

// Check asks the provider's /models with the key: what `vera check` says
// about the cloud. It returns how many models the provider lists.
func (p *Provider) Check(ctx context.Context) (int, error) {
	cat, err := p.fetchModels(ctx)
	if err == nil {
		p.catalogMu.Lock()
		p.catalog, p.fetched, p.fetchedOK = cat, p.now(), true
		p.catalogMu.Unlock()
	}
	return len(cat), err
}

// models returns the provider's /models as last fetched, fetching it again
// when it is older than catalogTTL (failedTTL after a failure). One fetch
// runs at a time, outside the lock and apart from the request that
// started it (a client hanging up does not spoil it); chats meanwhile use
// what was fetched before, or the defaults.
func (p *Provider) models(ctx context.Context) (map[string]Model, error) {
	p.catalogMu.Lock()
	ttl := catalogTTL
	if !p.fetchedOK {
		ttl = failedTTL
	}
	if p.fetching != nil || (!p.fetched.IsZero() && p.now().Sub(p.fetched) < ttl) {
		cat, wait := p.catalog, p.fetching
		p.catalogMu.Unlock()
		if wait != nil && cat == nil {
			select { // the first fetch: worth a short wait
			case <-wait:
				return p.models(ctx)
			case <-ctx.Done():
			}
		}
		return cat, nil
	}
	done := make(chan struct{})
	p.fetching = done
	p.catalogMu.Unlock()

	cat, err := p.fetchModels(context.WithoutCancel(ctx))
	p.catalogMu.Lock()
	p.fetched, p.fetchedOK, p.fetching = p.now(), err == nil, nil
	if err == nil {
		p.catalog = cat
	}
	cat = p.catalog
	p.catalogMu.Unlock()
	close(done)
	return cat, err
}

func (p *Provider) fetchModels(ctx context.Context) (map[string]Model, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	u := *p.cfg.Base
	u.Path = strings.TrimRight(u.Path, "/") + "/models"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	if p.cfg.Key != "" {
		req.Header.Set("Authorization", "Bearer "+p.cfg.Key)
	}
	for k, v := range p.cfg.Headers {
		req.Header.Set(k, v)
	}
	res, err := p.rt.RoundTrip(req)
	if err != nil {
		return nil, fmt.Errorf("cloud provider %s cannot be reached: %s", p.host, errorText(err))
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 32<<20))
	if err != nil {
		return nil, fmt.Errorf("cloud provider %s: reading /models: %s", p.host, errorText(err))
	}
	if res.StatusCode != http.StatusOK {
		msg := providerMessage(b)
		if msg == "" {
			msg = http.StatusText(res.StatusCode)
		}
		return nil, fmt.Errorf("cloud provider %s answered %d to /models: %s", p.host, res.StatusCode, msg)
	}
	var list struct {
		Data []struct {
			ID            string `json:"id"`
			ContextLength int    `json:"context_length"`
			MaxModelLen   int    `json:"max_model_len"` // vLLM
			TopProvider   struct {
				ContextLength int `json:"context_length"`
			} `json:"top_provider"`
			Architecture struct {
				InputModalities []string `json:"input_modalities"`
			} `json:"architecture"`
			SupportedParameters []string `json:"supported_parameters"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, fmt.Errorf("cloud provider %s: /models is not the list it should be", p.host)
	}
	cat := make(map[string]Model, len(list.Data))
	for _, d := range list.Data {
		m := Model{ID: d.ID, ContextLength: d.ContextLength, Tools: true}
		if m.ContextLength <= 0 {
			m.ContextLength = max(d.TopProvider.ContextLength, d.MaxModelLen)
		}
		if len(d.SupportedParameters) > 0 {
			m.Tools = slices.Contains(d.SupportedParameters, "tools")
			m.Thinking = slices.Contains(d.SupportedParameters, "reasoning") || slices.Contains(d.SupportedParameters, "include_reasoning")
		}
		m.Vision = slices.Contains(d.Architecture.InputModalities, "image")
		cat[d.ID] = m
	}
	return cat, nil
}
