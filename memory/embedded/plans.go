package embedded

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/vera-proxy/vera/memory"
)

// Conversations' plans (memory.PlanStore) live in the same file: a
// restart forwards each conversation's prefix as before it.

const plansSchema = `
CREATE TABLE IF NOT EXISTS plans (
	id        TEXT PRIMARY KEY,
	namespace TEXT NOT NULL,
	rev       INTEGER NOT NULL,
	used      INTEGER NOT NULL,
	body      BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS plans_ns ON plans(namespace);
CREATE INDEX IF NOT EXISTS plans_used ON plans(used);
CREATE TABLE IF NOT EXISTS plan_keys (
	key  TEXT PRIMARY KEY,
	plan TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS plan_keys_plan ON plan_keys(plan);
CREATE TABLE IF NOT EXISTS plan_memories (
	memory TEXT NOT NULL,
	plan   TEXT NOT NULL,
	PRIMARY KEY (memory, plan)
);
CREATE INDEX IF NOT EXISTS plan_memories_plan ON plan_memories(plan);
`

var _ memory.PlanStore = (*DB)(nil)

// LoadPlan implements memory.PlanStore.
func (d *DB) LoadPlan(ctx context.Context, key string) (memory.Plan, error) {
	var p memory.Plan
	var used int64
	err := d.db.QueryRowContext(ctx, `SELECT p.id, p.namespace, p.rev, p.used, p.body FROM plan_keys k JOIN plans p ON p.id = k.plan WHERE k.key = ?`, key).
		Scan(&p.ID, &p.Namespace, &p.Rev, &used, &p.Body)
	if errors.Is(err, sql.ErrNoRows) {
		return p, memory.ErrNotFound
	}
	if err != nil {
		return p, err
	}
	p.Used = time.Unix(0, used).UTC()
	if time.Since(p.Used) > memory.PlanTTL {
		return memory.Plan{}, memory.ErrNotFound
	}
	return p, nil
}

// SavePlan implements memory.PlanStore. A plan is a cache of what was
// forwarded: it is written without waiting for the disk (a power loss
// costs its conversation one full turn).
func (d *DB) SavePlan(ctx context.Context, p memory.Plan) error {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	expire := d.plansExpired.Load()+int64(time.Hour) < time.Now().UnixNano()
	err := d.relaxedTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO plans (id, namespace, rev, used, body) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT(id) DO UPDATE SET namespace = excluded.namespace, rev = excluded.rev, used = excluded.used, body = excluded.body`,
			p.ID, p.Namespace, p.Rev, p.Used.UnixNano(), p.Body); err != nil {
			return err
		}
		for _, q := range []string{`DELETE FROM plan_keys WHERE plan = ?`, `DELETE FROM plan_memories WHERE plan = ?`} {
			if _, err := tx.ExecContext(ctx, q, p.ID); err != nil {
				return err
			}
		}
		for _, k := range p.Keys {
			if _, err := tx.ExecContext(ctx, `INSERT INTO plan_keys (key, plan) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET plan = excluded.plan`, k, p.ID); err != nil {
				return err
			}
		}
		for _, id := range p.Memories {
			if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO plan_memories (memory, plan) VALUES (?, ?)`, id, p.ID); err != nil {
				return err
			}
		}
		if expire {
			_, err := dropPlansWhere(ctx, tx, `used < ?`, time.Now().Add(-memory.PlanTTL).UnixNano())
			return err
		}
		return nil
	})
	if err == nil && expire {
		d.plansExpired.Store(time.Now().UnixNano())
	}
	return err
}

// DropPlans implements memory.PlanStore.
func (d *DB) DropPlans(ctx context.Context, ns string, ids ...string) (int, error) {
	if ns == "" && len(ids) == 0 {
		return 0, nil
	}
	d.wmu.Lock()
	defer d.wmu.Unlock()
	n := 0
	err := d.tx(ctx, func(tx *sql.Tx) error {
		n = 0
		if len(ids) == 0 {
			c, err := dropPlansWhere(ctx, tx, `namespace = ?`, ns)
			n = c
			return err
		}
		return inChunks(ids, func(in string, args []any) error {
			c, err := dropPlansWhere(ctx, tx, `id IN (SELECT plan FROM plan_memories WHERE memory IN `+in+`)`, args...)
			n += c
			return err
		})
	})
	if err == nil && n > 0 {
		// A plan carries its memories' text: dropped with them, it
		// leaves none in the write-ahead log either (erase.go).
		err = d.checkpoint(ctx)
	}
	return n, err
}

// dropPlansWhere drops the plans matching where, their keys and memories,
// and reports how many. The plans are found first: where may read the
// tables the drop empties.
func dropPlansWhere(ctx context.Context, tx *sql.Tx, where string, args ...any) (int, error) {
	rows, err := tx.QueryContext(ctx, `SELECT id FROM plans WHERE `+where, args...)
	if err != nil {
		return 0, err
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, err
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	err = inChunks(ids, func(in string, args []any) error {
		for _, q := range []string{`DELETE FROM plan_keys WHERE plan IN ` + in, `DELETE FROM plan_memories WHERE plan IN ` + in, `DELETE FROM plans WHERE id IN ` + in} {
			if _, err := tx.ExecContext(ctx, q, args...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return len(ids), nil
}
