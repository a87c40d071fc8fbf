package curator

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Spec returns the cron spec of a schedule: curator.schedule when set (a
// standard 5-field cron spec, or a descriptor such as @daily), else
// curator.run_time "HH:MM" every day.
func Spec(schedule, runTime string) (string, error) {
	if s := strings.TrimSpace(schedule); s != "" {
		if _, err := cron.ParseStandard(s); err != nil {
			return "", fmt.Errorf("curator.schedule %q: %w", s, err)
		}
		return s, nil
	}
	hh, mm, ok := strings.Cut(strings.TrimSpace(runTime), ":")
	h, err1 := strconv.Atoi(hh)
	m, err2 := strconv.Atoi(mm)
	if !ok || err1 != nil || err2 != nil || h < 0 || h > 23 || m < 0 || m > 59 || len(mm) != 2 {
		return "", fmt.Errorf("curator.run_time %q: want HH:MM", runTime)
	}
	return fmt.Sprintf("%d %d * * *", m, h), nil
}

// Scheduler runs the curator on its schedule, in its time zone.
type Scheduler struct {
	cron  *cron.Cron
	entry cron.EntryID
}

// Schedule starts running c on spec (see Spec) in loc. Whether a run is
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
