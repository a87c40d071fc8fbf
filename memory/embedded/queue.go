package embedded

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/embedded/journal"
)

// The queue's own encoding of a memory. memory.Memory's JSON tags are the
// API's (they hide Vector and Tokens), so the queue never marshals a
// Memory directly: a field the API hides would be silently lost on its way
// through the queue. queueEntry names every field of memory.Memory
// explicitly; TestQueueCarriesEveryField fails when Memory gains a field
// the queue does not carry.

// queueVersion is the version of queueEntry written by Enqueue. Rows
// without a version are plain JSON of a memory.Memory, as vera wrote them
// before: they still decode, with Tokens 0 (unknown) and no vector.
const queueVersion = 1

type queueEntry struct {
	V         int            `json:"v"`
	ID        string         `json:"id"`
	Namespace string         `json:"ns"`
	Type      memory.Type    `json:"type"`
	Text      string         `json:"text"`
	Time      time.Time      `json:"time"`
	Model     string         `json:"model,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
	Tokens    int            `json:"tokens,omitempty"`
	// Vector is little-endian float32s (base64 in JSON): exact, and short.
	Vector []byte `json:"vector,omitempty"`
}

func toQueueEntry(m memory.Memory) queueEntry {
	e := queueEntry{
		V: queueVersion, ID: m.ID, Namespace: m.Namespace, Type: m.Type, Text: m.Text, Time: m.Time,
		Model: m.Model, Metadata: m.Metadata, Tokens: m.Tokens,
	}
	if m.Vector != nil {
		e.Vector = encodeVector(m.Vector)
	}
	return e
}

func (e *queueEntry) memory() memory.Memory {
	m := memory.Memory{
		ID: e.ID, Namespace: e.Namespace, Type: e.Type, Text: e.Text, Time: e.Time,
		Model: e.Model, Metadata: e.Metadata, Tokens: e.Tokens,
	}
	if e.Vector != nil {
		m.Vector = decodeVector(e.Vector)
	}
	return m
}

// encodeQueued renders a memory as a queue row's body.
func encodeQueued(m memory.Memory) ([]byte, error) {
	return json.Marshal(toQueueEntry(m))
}

// decodeQueued reads a queue row's body, of this version or an earlier one.
func decodeQueued(body []byte) (memory.Memory, error) {
	var e queueEntry
	if err := json.Unmarshal(body, &e); err != nil {
		return memory.Memory{}, err
	}
	switch e.V {
	case queueVersion:
		return e.memory(), nil
	case 0:
		// Written before the queue had its own encoding.
		var m memory.Memory
		if err := json.Unmarshal(body, &m); err != nil {
			return memory.Memory{}, err
		}
		return m, nil
	}
	return memory.Memory{}, fmt.Errorf("entry of version %d, newer than this vera's %d", e.V, queueVersion)
}

// Enqueue commits memories to the durable queue; it returns once they are
// on disk, in the queue's journal (queuejournal.go).
func (d *DB) Enqueue(ctx context.Context, ms ...memory.Memory) error {
	if len(ms) == 0 {
		return nil
	}
	rs := make([]journal.Record, len(ms))
	now := time.Now().UnixNano()
	for i, m := range ms {
		if err := m.Validate(); err != nil {
			return err
		}
		b, err := encodeQueued(m)
		if err != nil {
			return fmt.Errorf("memory %s: %w", m.ID, err)
		}
		rs[i] = journal.Record{At: now + int64(i), ID: m.ID, Body: b} // in the batch's order
	}
	if err := d.enqueue(ctx, rs); err != nil {
		return fmt.Errorf("enqueue: %w", err)
	}
	return nil
}

// enqueue writes rs to the journal, or, when it is full, syncs the table
// (which then holds every record in it) and writes them at its start.
func (d *DB) enqueue(ctx context.Context, rs []journal.Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := d.j.Append(rs); !errors.Is(err, journal.ErrFull) {
		return err
	}
	d.wmu.Lock()
	defer d.wmu.Unlock()
	if !journal.Fits(rs) {
		// Larger than the whole journal: into the table, at FULL.
		return d.queueTx(ctx, d.tx, nil, func(tx *sql.Tx) error { return d.insert(ctx, tx, rs) })
	}
	// A new round (the table holds every record in the file, on disk, and
	// it is written from its start), again if other writers filled it
	// meanwhile.
	for {
		if err := d.newRound(ctx); err != nil {
			return err
		}
		if err := d.j.Append(rs); !errors.Is(err, journal.ErrFull) {
			return err
		}
	}
}

// Pending returns up to limit queued memories, oldest first: the table's,
// then the journal's, which it reads where they are (the worker's Settle
// then stores them and takes them off in one transaction, never writing
// them into the table).
func (d *DB) Pending(ctx context.Context, limit int) ([]memory.Memory, error) {
	// The journal's first: one that moves to the table meanwhile is then
	// in both, and counted once, rather than in neither.
	jq := d.j.Queued()
	rows, err := d.stmts.pending.QueryContext(ctx, limit)
	if err != nil {
		return nil, fmt.Errorf("queue: %w", err)
	}
	defer rows.Close()
	var out []memory.Memory
	at := map[string]int{}
	add := func(id string, body []byte) error {
		m, err := decodeQueued(body)
		if err != nil {
			return fmt.Errorf("queue: corrupt entry %s: %w", id, err)
		}
		if i, ok := at[id]; ok {
			out[i] = m // queued again under its id: in its place, as the table keeps it
		} else if len(out) < limit {
			at[id] = len(out)
			out = append(out, m)
		}
		return nil
	}
	for rows.Next() {
		var id, body string
		if err := rows.Scan(&id, &body); err != nil {
			return nil, fmt.Errorf("queue: %w", err)
		}
		if err := add(id, []byte(body)); err != nil {
			return nil, err
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("queue: %w", err)
	}
	for _, r := range jq {
		if err := add(r.ID, r.Body); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Done removes memories from the queue.
func (d *DB) Done(ctx context.Context, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	d.wmu.Lock()
	defer d.wmu.Unlock()
	err := d.queueTx(ctx, d.tx, ids, func(tx *sql.Tx) error {
		st := tx.StmtContext(ctx, d.stmts.dequeue)
		for _, id := range ids {
			if _, err := st.ExecContext(ctx, id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("queue done: %w", err)
	}
	return nil
}

// Len counts the queued memories.
func (d *DB) Len(ctx context.Context) (int, error) {
	// A record moving from the journal to the table meanwhile is counted
	// twice at most, only in the moment its transaction commits.
	var n int
	if err := d.db.QueryRowContext(ctx, `SELECT count(*) FROM queue`).Scan(&n); err != nil {
		return 0, fmt.Errorf("queue: %w", err)
	}
	return n + d.j.Waiting(), nil
}
