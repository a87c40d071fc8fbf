package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/vera-proxy/vera/admin"

	"github.com/vera-proxy/vera/memory"
)

func listMemories(ctx context.Context, c *admin.Client, pos []string, o memoriesOptions, out io.Writer) error {
	q := admin.ListQuery{Namespace: o.ns, Type: o.typ, Q: strings.Join(pos, " "), Cursor: o.cursor, Limit: o.limit, Private: o.private}
	if o.oldest {
		q.Order = "oldest"
	}
	for _, t := range []struct {
		flag, v string
		dst     *time.Time
	}{{"since", o.since, &q.Since}, {"until", o.until, &q.Until}} {
		if t.v == "" {
			continue
		}
		v, err := time.Parse(time.RFC3339, t.v)
		if err != nil {
			if v, err = time.ParseInLocation(time.DateOnly, t.v, time.Local); err != nil {
				return UsageError{fmt.Sprintf("memories: --%s %q: want a date (2026-11-22) or an RFC 3339 time (2026-11-22T10:00:00Z)", t.flag, t.v)}
			}
		}
		*t.dst = v
	}
	var all admin.Page
	for {
		page, err := c.List(ctx, q)
		if err != nil {
			return err
		}
		all.Memories = append(all.Memories, page.Memories...)
		all.NextCursor = page.NextCursor
		if !o.all || q.Q != "" || page.NextCursor == "" {
			break
		}
		q.Cursor = page.NextCursor
	}
	if o.json {
		return writeJSON(out, all)
	}
	writeTable(out, all.Memories, q.Q != "")
	switch {
	case len(all.Memories) == 0:
		fmt.Fprintf(out, "no memories in namespace %q\n", o.ns)
	case all.NextCursor != "":
		fmt.Fprintf(out, "%d shown; more with --cursor %s (or --all)\n", len(all.Memories), all.NextCursor)
	}
	return nil
}

// listNamespaces prints who each namespace is, with its counts, when it
// last chatted and the start of its profile.
func listNamespaces(ctx context.Context, c *admin.Client, _ []string, o memoriesOptions, out io.Writer) error {
	all, err := c.Namespaces(ctx)
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(out, map[string]any{"namespaces": all})
	}
	if len(all) == 0 {
		fmt.Fprintln(out, "no namespaces yet")
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tNAME\tEMAIL\tRAW\tCURATED\tRULES\tPROFILE\tFORGOTTEN\tLAST SEEN (UTC)\tPROFILE TEXT")
	for _, n := range all {
		seen := "-"
		if n.LastSeen != nil {
			seen = n.LastSeen.UTC().Format("2006-01-02 15:04")
		}
		k := n.Counts
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", n.Namespace, oneLine(n.Name, 40), oneLine(n.Email, 40),
			k["raw"], k["curated"], k["rule"], k["profile"], k["forgotten"], seen, oneLine(n.Profile, 60))
	}
	return tw.Flush()
}

func showMemory(ctx context.Context, c *admin.Client, pos []string, o memoriesOptions, out io.Writer) error {
	m, err := c.Get(ctx, pos[0])
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(out, m)
	}
	es, err := c.History(ctx, pos[0])
	if err != nil {
		return err
	}
	if err := printMemory(out, m, false); err != nil {
		return err
	}
	if len(es) > 0 {
		fmt.Fprintln(out, "\nhistory:")
		writeHistory(out, es)
	}
	return nil
}

// memoryHistory prints what changed a memory, and who, oldest first; an
// erased memory still has its history (which holds no text).
func memoryHistory(ctx context.Context, c *admin.Client, pos []string, o memoriesOptions, out io.Writer) error {
	es, err := c.History(ctx, pos[0])
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(out, map[string]any{"history": es})
	}
	if len(es) == 0 {
		fmt.Fprintf(out, "%s has no history: it was written before vera kept one.\n", pos[0])
		return nil
	}
	writeHistory(out, es)
	return nil
}

func writeHistory(out io.Writer, es []memory.Entry) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME (UTC)\tACTION\tBY")
	for _, e := range es {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", e.At.UTC().Format(time.DateTime), e.Action, e.Actor)
	}
	tw.Flush()
}

func writeJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeTable prints memories one per line, their text cut to one line.
func writeTable(out io.Writer, ms []admin.Memory, scored bool) {
	if len(ms) == 0 {
		return
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	head := "ID\tTYPE\tTIME (UTC)\t"
	if scored {
		head += "SCORE\t"
	}
	fmt.Fprintln(tw, head+"TEXT")
	for _, m := range ms {
		row := fmt.Sprintf("%s\t%s\t%s\t", m.ID, m.Type, m.Timestamp.UTC().Format("2006-01-02 15:04"))
		if scored {
			score := 0.0
			if m.Score != nil {
				score = *m.Score
			}
			row += fmt.Sprintf("%.3f\t", score)
		}
		fmt.Fprintln(tw, row+oneLine(m.Text, 80))
	}
	tw.Flush()
}

// oneLine cuts text to one line of at most n runes.
func oneLine(text string, n int) string {
	text = strings.Join(strings.Fields(text), " ")
	if r := []rune(text); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return text
}

func printMemory(out io.Writer, m admin.Memory, asJSON bool) error {
	if asJSON {
		return writeJSON(out, m)
	}
	fmt.Fprintf(out, "id:         %s\nnamespace:  %s\ntype:       %s\ntime (UTC): %s\n", m.ID, m.Namespace, m.Type, m.Timestamp.UTC().Format(time.RFC3339))
	if m.Model != "" {
		fmt.Fprintf(out, "model:      %s\n", m.Model)
	}
	fmt.Fprintf(out, "from:       %s\n", sourceLine(m.Metadata))
	if why := memory.PrivateWhy(memory.Memory{Metadata: m.Metadata}); memory.IsPrivate(memory.Memory{Metadata: m.Metadata}) {
		fmt.Fprintf(out, "private:    yes (%s): never sent to a model whose policy is shareable\n", strings.Join(why, ", "))
	}
	if m.LastUsed != nil {
		answers := "answers"
		if m.UsedCount == 1 {
			answers = "answer"
		}
		fmt.Fprintf(out, "used:       in %d %s, last %s\n", m.UsedCount, answers, m.LastUsed.UTC().Format(time.RFC3339))
	} else {
		fmt.Fprintf(out, "used:       never\n")
	}
	if len(m.Metadata) > 0 {
		md, _ := json.Marshal(m.Metadata)
		fmt.Fprintf(out, "metadata:   %s\n", md)
	}
	fmt.Fprintf(out, "\n%s\n", m.Text)
	return nil
}

// sourceLine says where a memory came from (metadata.source) in a line:
// "chat (ollama-chat, chat trip-1, ollama/0.24.0, llama3)"; "unknown" for
// one written before vera kept it.
func sourceLine(md map[string]any) string {
	src, _ := md[memory.MetaSource].(map[string]any)
	via, _ := src["via"].(string)
	if via == "" {
		return "unknown"
	}
	var parts []string
	for _, k := range []string{"dialect", "chat_id", "client", "model", "request_id"} {
		if v, _ := src[k].(string); v != "" {
			if k == "chat_id" {
				v = "chat " + v
			}
			if k == "request_id" {
				v = "request " + v
			}
			parts = append(parts, v)
		}
	}
	if chats, _ := src["chats"].([]any); len(chats) > 0 {
		parts = append(parts, fmt.Sprintf("from %d chats", len(chats)))
	}
	if from, _ := src["from"].(string); from != "" {
		until, _ := src["until"].(string)
		parts = append(parts, "turns of "+from+" to "+until)
	}
	if len(parts) == 0 {
		return via
	}
	return via + " (" + strings.Join(parts, ", ") + ")"
}
