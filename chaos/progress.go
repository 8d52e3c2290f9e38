package chaos

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"time"
)

// progress is when the workload last saw a record persisted: after each heal the
// harness waits for it to move, which is the recovery time it reports and what makes
// the next fault hit a working cluster.
type progress struct{ last atomic.Int64 } // Unix nanoseconds

func (p *progress) persisted() { p.last.Store(time.Now().UnixNano()) }

// since waits until a record is persisted after t, at most limit, and returns how long
// after t that was.
func (p *progress) since(ctx context.Context, t time.Time, limit time.Duration) (time.Duration, error) {
	deadline := t.Add(limit)
	for {
		if last := p.last.Load(); last > t.UnixNano() {
			return time.Duration(last - t.UnixNano()), nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("no record persisted within %v after the heal", limit)
		}
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		sleep(ctx, 10*time.Millisecond)
	}
}

// distribution summarizes times in milliseconds: median, 90th percentile, max.
func distribution(ms []int64) string {
	s := slices.Clone(ms)
	slices.Sort(s)
	// Nearest rank: the smallest time at or above a fraction f of the cycles (of two
	// cycles the median is the first; the max rank would report a 24 ms failover's
	// companion of 2188 ms as the median).
	q := func(f float64) int64 { return s[max(0, int(math.Ceil(f*float64(len(s))))-1)] }
	return fmt.Sprintf("median %d ms, p90 %d ms, max %d ms", q(0.5), q(0.9), s[len(s)-1])
}
