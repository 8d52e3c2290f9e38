package chaos

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// progress is when the workload last saw a record persisted: after each heal the
// harness waits for it to move, which is the recovery time it reports and what makes
// the next fault hit a working cluster. It also keeps when the live consumer last read
// from each partition (broker-hang waits for the partitions of a stopped broker).
type progress struct {
	last atomic.Int64 // Unix nanoseconds
	mu   sync.Mutex
	read map[int]int64 // partition: Unix nanoseconds
}

func (p *progress) persisted() { p.last.Store(time.Now().UnixNano()) }

// readFrom notes that the live consumer read records of partition part at now (Unix
// nanoseconds). Once per partition per poll.
func (p *progress) readFrom(part int, now int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.read == nil {
		p.read = map[int]int64{}
	}
	p.read[part] = now
}

// since waits until a record is persisted after t, at most limit, and returns how long
// after t that was.
func (p *progress) since(ctx context.Context, t time.Time, limit time.Duration) (time.Duration, error) {
	return p.until(ctx, t, limit, nil, "the heal")
}

// movedOn waits until, after t, a record is persisted and the live consumer has read from
// every partition of parts, at most limit, and returns how long after t that was.
func (p *progress) movedOn(ctx context.Context, parts []int, t time.Time, limit time.Duration) (time.Duration, error) {
	return p.until(ctx, t, limit, parts, "the move")
}

// until waits until a record is persisted after t (the event) and every partition of
// parts is read after t, at most limit, and returns how long after t the last of them
// was.
func (p *progress) until(ctx context.Context, t time.Time, limit time.Duration, parts []int, event string) (time.Duration, error) {
	deadline := t.Add(limit)
	for {
		persisted := p.last.Load()
		lastRead, behind := p.readAfter(t.UnixNano(), parts)
		if persisted > t.UnixNano() && len(behind) == 0 {
			return time.Duration(max(persisted, lastRead) - t.UnixNano()), nil
		}
		if time.Now().After(deadline) {
			if persisted <= t.UnixNano() {
				return 0, fmt.Errorf("no record persisted within %v after %s", limit, event)
			}
			return 0, fmt.Errorf("partitions %v not read within %v after %s", behind, limit, event)
		}
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		sleep(ctx, 10*time.Millisecond)
	}
}

// lastRead returns when the live consumer last read from any partition (Unix
// nanoseconds; 0 before its first read).
func (p *progress) lastRead() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var last int64
	for _, at := range p.read {
		last = max(last, at)
	}
	return last
}

// readAfter returns the latest read of parts, and those of parts not read after t (Unix
// nanoseconds).
func (p *progress) readAfter(t int64, parts []int) (last int64, behind []int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, part := range parts {
		at := p.read[part]
		if at <= t {
			behind = append(behind, part)
		}
		last = max(last, at)
	}
	return last, behind
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
