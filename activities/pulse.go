package activities

import (
	"context"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
)

// pulseEvery is how often keepAlive heartbeats. Heartbeating is local: the SDK sends the
// latest heartbeat to Temporal at most every HeartbeatThrottle (the worker's setting), so
// a beat between sends costs a lock.
const pulseEvery = time.Second

// LoopHeartbeatTimeout is the heartbeat timeout of the long activities that keepAlive
// keeps beating (the reconciler's loop, the sweep): a worker that dies under one (a crash,
// SIGKILL, the node lost) is noticed this long after its last beat, and the activity is
// retried on another worker, rather than holding its schedule's next runs for a minute.
const LoopHeartbeatTimeout = 10 * time.Second

// HeartbeatThrottle is the most a worker waits between sending an activity's heartbeats
// to Temporal (worker.Options.MaxHeartbeatThrottleInterval). Well under
// LoopHeartbeatTimeout, so that a send that is slow on a busy server still lands in time.
const HeartbeatThrottle = 3 * time.Second

type pulseKey struct{}

// pulse is what keepAlive repeats: the details of the activity's last heartbeat.
type pulse struct {
	mu      sync.Mutex
	details []any
}

// keepAlive heartbeats ctx's activity every pulseEvery from a goroutine of its own until
// the returned stop is called, so that its heartbeat timeout measures whether the worker
// is alive, not how long the activity waits on one thing (a slow page of MySQL, a
// Temporal call, a hung channel call). Each beat repeats the details last given to
// heartbeat with the returned context. Outside an activity (a test calling it directly)
// it does nothing.
func keepAlive(ctx context.Context) (context.Context, func()) {
	if !activity.IsActivity(ctx) {
		return ctx, func() {}
	}
	p := &pulse{}
	ctx = context.WithValue(ctx, pulseKey{}, p)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(pulseEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				p.mu.Lock()
				details := p.details
				p.mu.Unlock()
				activity.RecordHeartbeat(ctx, details...)
			}
		}
	})
	return ctx, func() {
		close(done)
		wg.Wait()
	}
}
