package curator

import (
	"context"
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
)

// Scheduler runs the curator on its schedule, in its time zone.
type Scheduler struct {
	cron  *cron.Cron
	entry cron.EntryID
}

// Schedule starts running c on spec, a standard cron spec (config resolves
// it from curator.schedule or curator.run_time), in loc. Whether a run is
// daily or monthly is decided when it starts (monthly on the 1st in loc).
func (c *Curator) Schedule(ctx context.Context, spec string, loc *time.Location) (*Scheduler, error) {
	if loc == nil {
		loc = time.Local
	}
	cr := cron.New(cron.WithLocation(loc))
	id, err := cr.AddFunc(spec, func() { c.Run(ctx, Options{}) })
	if err != nil {
		return nil, fmt.Errorf("curator schedule %q: %w", spec, err)
	}
	cr.Start()
	return &Scheduler{cron: cr, entry: id}, nil
}

// Next returns the next scheduled run.
func (s *Scheduler) Next() time.Time {
	if s == nil {
		return time.Time{}
	}
	return s.cron.Entry(s.entry).Next
}

// Stop stops scheduling and waits for a running run to end.
func (s *Scheduler) Stop() {
	if s != nil {
		<-s.cron.Stop().Done()
	}
}
