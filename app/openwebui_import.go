package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/vera-proxy/vera/admin"
	"github.com/vera-proxy/vera/config"
	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/openwebui"
)

// importOpenWebUICmd runs `vera memories import --from-open-webui URL
// --token TOKEN [--namespace NS]`: the memories the token's user keeps in
// that Open WebUI become curated memories of the namespace of that user's
// id (where vera keeps what they chat through Open WebUI) or of NS. It
// talks to the running vera (--url), or to the store when none runs, as
// every `vera memories` command does; what vera holds already is left as
// it is, so importing again adds only what is new.
func importOpenWebUICmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("vera memories import --from-open-webui", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	from := fs.String("from-open-webui", "", "")
	token := fs.String("token", "", "")
	ns := fs.String("namespace", "", "")
	veraURL := fs.String("url", "", "")
	var flags config.Flags
	configFlags(fs, &flags)
	if err := fs.Parse(args); err != nil {
		return UsageError{"memories import --from-open-webui: " + err.Error()}
	}
	nsSet := false
	fs.Visit(func(f *flag.Flag) { nsSet = nsSet || f.Name == "namespace" })
	*ns = strings.TrimSpace(*ns)
	tok := bearerToken(*token)
	base, err := openWebUIAddress(*from)
	switch {
	case fs.NArg() > 0:
		return UsageError{fmt.Sprintf("memories import --from-open-webui: unexpected argument %q", fs.Arg(0))}
	case err != nil:
		return UsageError{"memories import --from-open-webui: " + err.Error()}
	case tok == "":
		return UsageError{"memories import --from-open-webui: --token is required: an API key or the JWT token of the Open WebUI user, from Settings → Account"}
	case nsSet && *ns == "":
		return UsageError{"memories import: --namespace must not be empty"}
	}
	cfg, err := config.Load(flags, getenv)
	if err != nil {
		return err
	}
	rep, err := importOpenWebUI(ctx, &openwebui.Client{Base: base, Token: tok, UserAgent: "vera/" + Version()}, *ns,
		func() (*admin.Client, func(), error) { return memoriesClient(ctx, cfg, *veraURL, stderr) })
	if err != nil {
		return err
	}
	if err := json.NewEncoder(stdout).Encode(rep); err != nil {
		return err
	}
	if rep.Read == 0 {
		fmt.Fprintf(stderr, "Open WebUI at %s holds no memories of that user: nothing to import\n", rep.From)
	}
	if n := rep.ErrorCount; n > 0 {
		return fmt.Errorf("memories import: %d memories were not imported (the others were)", n)
	}
	return nil
}

// bearerToken is the token as given, without spaces or a "Bearer " copied
// with it.
func bearerToken(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 7 && strings.EqualFold(s[:7], "bearer ") {
		s = strings.TrimSpace(s[7:])
	}
	return s
}

// openWebUIAddress parses the address of an Open WebUI.
func openWebUIAddress(raw string) (*url.URL, error) {
	if strings.TrimSpace(raw) == "" {
		return nil, errors.New("want the address of Open WebUI: --from-open-webui http://HOST:PORT")
	}
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("%q is not an http:// or https:// address of Open WebUI", config.RedactURL(raw))
	}
	return u, nil
}

// importOpenWebUI reads the memories of owui's user and imports into ns
// ("": that user's id) those vera does not hold yet, through the client
// vera gives; it asks for that client only when there is something to
// import.
func importOpenWebUI(ctx context.Context, owui *openwebui.Client, ns string, vera func() (*admin.Client, func(), error)) (openwebui.Report, error) {
	rep := openwebui.Report{From: openwebui.Server(owui.Base), Namespace: ns, Skipped: map[string]int{}}
	read, err := owui.Memories(ctx)
	if err != nil {
		return rep, err
	}
	rep.Read = len(read)
	if len(read) == 0 {
		return rep, nil
	}
	if rep.Namespace == "" {
		if rep.Namespace, err = userOf(read, rep.From); err != nil {
			return rep, err
		}
	}
	var ms []memory.Memory
	for _, m := range read {
		if mm, ok := openwebui.Convert(m, rep.From, rep.Namespace); ok {
			ms = append(ms, mm)
		} else {
			rep.Skipped[openwebui.Empty]++
		}
	}
	if len(ms) == 0 {
		return rep, nil
	}
	c, done, err := vera()
	if err != nil {
		return rep, err
	}
	defer done()
	fresh, err := notInVera(ctx, c, rep.Namespace, ms, rep.Skipped)
	if err != nil || len(fresh) == 0 {
		return rep, err
	}
	return rep, sendImport(ctx, c, fresh, &rep)
}

// userOf is the namespace of the Open WebUI user whose memories ms are:
// their user_id, trimmed, as vera takes it from the X-OpenWebUI-User-Id
// header Open WebUI sends with their chats.
func userOf(ms []openwebui.Memory, from string) (string, error) {
	var users []string
	for _, m := range ms {
		if id := strings.TrimSpace(m.UserID); id != "" && !slices.Contains(users, id) {
			users = append(users, id)
		}
	}
	switch len(users) {
	case 0:
		return "", fmt.Errorf("the memories of Open WebUI at %s name no user_id: name the namespace to import into with --namespace", from)
	case 1:
		return users[0], nil
	}
	return "", fmt.Errorf("Open WebUI at %s answered with memories of %d users (%s): name the namespace to import into with --namespace", from, len(users), strings.Join(users, ", "))
}

// notInVera keeps of ms those namespace ns does not hold, counting the
// others in skipped: a memory imported before stays as it is (the person
// may have edited it since), as does one whose text is there already,
// case and spacing aside; one imported and then erased, or forgotten
// and gone after its 30 days, stays gone (its history outlives it).
func notInVera(ctx context.Context, c *admin.Client, ns string, ms []memory.Memory, skipped map[string]int) ([]memory.Memory, error) {
	ids, texts, err := holdings(ctx, c, ns)
	if err != nil {
		return nil, err
	}
	var fresh []memory.Memory
	for _, m := range ms {
		key := sameText(m.Text)
		if ids[m.ID] || texts[key] {
			skipped[openwebui.AlreadyThere]++
			continue
		}
		es, err := c.History(ctx, m.ID)
		var ae *admin.APIError
		switch {
		case errors.As(err, &ae) && ae.Status == http.StatusNotFound:
		case err != nil:
			return nil, fmt.Errorf("asking vera about memory %s: %w", m.ID, err)
		case len(es) > 0 && (es[len(es)-1].Action == memory.Erased || es[len(es)-1].Action == memory.Deleted):
			skipped[openwebui.RemovedInVera]++
			continue
		default:
			// There, but not where holdings looked (a raw turn now).
			skipped[openwebui.AlreadyThere]++
			continue
		}
		texts[key] = true // the same text twice in Open WebUI: once here
		fresh = append(fresh, m)
	}
	return fresh, nil
}

// holdings lists the ids and texts (as sameText) of the memories of
// namespace ns, but its raw turns: what an imported memory may have
// become.
func holdings(ctx context.Context, c *admin.Client, ns string) (ids, texts map[string]bool, err error) {
	ids, texts = map[string]bool{}, map[string]bool{}
	for _, typ := range []memory.Type{memory.Curated, memory.Rule, memory.Profile, memory.Forgotten} {
		q := admin.ListQuery{Namespace: ns, Type: string(typ), Limit: 1000}
		for {
			page, err := c.List(ctx, q)
			if err != nil {
				return nil, nil, fmt.Errorf("reading namespace %q of vera: %w", ns, err)
			}
			for _, m := range page.Memories {
				ids[m.ID] = true
				texts[sameText(m.Text)] = true
			}
			if page.NextCursor == "" {
				break
			}
			q.Cursor = page.NextCursor
		}
	}
	return ids, texts, nil
}

// sameText is text as memories are compared: case and spacing aside.
func sameText(text string) string {
	return strings.ToLower(strings.Join(strings.Fields(text), " "))
}

// sendImport imports ms through vera's import (the JSONL of an export):
// classified private as every import is, counted, embedded and recorded
// in their history there. What vera refuses is listed in rep.
func sendImport(ctx context.Context, c *admin.Client, ms []memory.Memory, rep *openwebui.Report) error {
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	for _, m := range ms {
		line := struct {
			ID        string         `json:"id"`
			Namespace string         `json:"namespace"`
			Type      memory.Type    `json:"type"`
			Text      string         `json:"text"`
			Timestamp time.Time      `json:"timestamp"`
			Metadata  map[string]any `json:"metadata"`
		}{m.ID, m.Namespace, m.Type, m.Text, m.Time, m.Metadata}
		if err := enc.Encode(line); err != nil {
			return err
		}
	}
	res, err := c.Import(ctx, &body)
	if err != nil {
		return fmt.Errorf("importing into vera: %w", err)
	}
	rep.Imported = res.Imported
	for _, e := range res.Errors {
		id := ""
		if e.Line >= 1 && e.Line <= len(ms) {
			src, _ := ms[e.Line-1].Metadata[memory.MetaSource].(map[string]any)
			id, _ = src["memory_id"].(string)
		}
		rep.Errors = append(rep.Errors, openwebui.Refused{ID: id, Error: e.Error})
	}
	rep.ErrorCount = max(res.ErrorCount, len(res.Errors))
	return nil
}
