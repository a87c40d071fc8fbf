package app

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/vera-proxy/vera/admin"

	"github.com/vera-proxy/vera/memory"
)

func addMemory(ctx context.Context, c *admin.Client, pos []string, o memoriesOptions, out io.Writer) error {
	typ := o.typ
	if typ == "" {
		typ = string(memory.Curated)
	}
	m, err := c.Add(ctx, o.ns, typ, strings.Join(pos, " "))
	if err != nil {
		return err
	}
	return printMemory(out, m, o.json)
}

func editMemory(ctx context.Context, c *admin.Client, pos []string, o memoriesOptions, out io.Writer) error {
	patch := map[string]any{}
	if len(pos) > 1 {
		patch["text"] = strings.Join(pos[1:], " ")
	}
	if o.private != "" {
		patch["metadata"] = map[string]any{memory.MetaPrivate: o.private == "true"}
	}
	m, err := c.Patch(ctx, pos[0], patch)
	if err != nil {
		return err
	}
	return printMemory(out, m, o.json)
}

func deleteMemories(ctx context.Context, c *admin.Client, pos []string, o memoriesOptions, out io.Writer) error {
	if o.confirm {
		n, err := c.ForgetNamespace(ctx, o.ns)
		if err != nil {
			return err
		}
		if o.json {
			return writeJSON(out, map[string]any{"namespace": o.ns, "forgotten": n})
		}
		fmt.Fprintf(out, "forgot namespace %q: %d memories and queued turns\n", o.ns, n)
		return nil
	}
	for _, id := range pos {
		if err := c.Delete(ctx, id); err != nil {
			return fmt.Errorf("deleting %s: %w", id, err)
		}
		if !o.json {
			fmt.Fprintf(out, "deleted %s\n", id)
		}
	}
	if o.json {
		return writeJSON(out, map[string]any{"deleted": pos})
	}
	return nil
}

// eraseNamespace erases a namespace and prints the receipt.
func eraseNamespace(ctx context.Context, c *admin.Client, _ []string, o memoriesOptions, out io.Writer) error {
	r, err := c.EraseNamespace(ctx, o.ns)
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(out, r)
	}
	fmt.Fprintf(out, "erased namespace %q at %s:", r.Namespace, r.At.Format(time.RFC3339))
	for _, k := range []string{"raw", "curated", "rule", "profile", "forgotten", "queued", "plans"} {
		fmt.Fprintf(out, " %s %d", k, r.Erased[k])
	}
	fmt.Fprintln(out)
	return nil
}

func exportMemories(ctx context.Context, c *admin.Client, _ []string, o memoriesOptions, out io.Writer) error {
	ns := o.ns
	if !o.nsSet {
		ns = "" // every namespace unless one is named
	}
	if o.output == "" || o.output == "-" {
		return c.Export(ctx, ns, out)
	}
	f, err := os.Create(o.output)
	if err != nil {
		return err
	}
	if err := c.Export(ctx, ns, f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func importMemories(ctx context.Context, c *admin.Client, pos []string, o memoriesOptions, out io.Writer) error {
	var in io.Reader = os.Stdin
	if pos[0] != "-" {
		f, err := os.Open(pos[0])
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	rep, err := c.Import(ctx, in)
	if err != nil {
		return err
	}
	if o.json {
		if err := writeJSON(out, rep); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(out, "imported %d memories\n", rep.Imported)
		for _, e := range rep.Errors {
			fmt.Fprintf(out, "line %d: %s\n", e.Line, e.Error)
		}
		if more := rep.ErrorCount - len(rep.Errors); more > 0 {
			fmt.Fprintf(out, "... and %d more bad lines\n", more)
		}
	}
	// A vera from before error_count sends only the list.
	if bad := max(rep.ErrorCount, len(rep.Errors)); bad > 0 {
		return fmt.Errorf("memories import: %d lines were not imported (the others were)", bad)
	}
	return nil
}
