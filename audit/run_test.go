package audit_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/paykit/paykit/audit"
	"github.com/paykit/paykit/payment"
)

// workflows is a fake WorkflowChecker: the workflow ids in running are running, every
// other one is not; err, if set, is returned for every call.
type workflows struct {
	mu      sync.Mutex
	running map[string]bool
	err     error
}

func (w *workflows) Running(_ context.Context, id string) (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.running[id], w.err
}

func (w *workflows) set(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.running[id] = true
}

// memStore serves records from memory the way the MySQL store pages them: by change
// time, then id, from the payments source only (records are changed at UpdatedAt, or
// CreatedAt if it is zero). changeOnReread, if set, moves a payment's Changed when it is
// read again, as a refund made while the audit runs would.
type memStore struct {
	recs           []audit.Record
	err            error
	pages          int
	changeOnReread map[string]bool
}

func changedAt(r audit.Record) time.Time {
	if r.Payment.UpdatedAt.IsZero() {
		return r.Payment.CreatedAt
	}
	return r.Payment.UpdatedAt
}

func (m *memStore) ChangedPage(_ context.Context, tenantID string, since, until time.Time, after audit.Cursor, limit int) ([]audit.Record, audit.Cursor, error) {
	if after.Source != audit.SourcePayments {
		return nil, audit.Cursor{Source: after.Source + 1}, nil
	}
	m.pages++
	if m.err != nil {
		return nil, after, m.err
	}
	recs := slices.Clone(m.recs)
	slices.SortFunc(recs, func(x, y audit.Record) int {
		return cmp.Or(changedAt(x).Compare(changedAt(y)), cmp.Compare(x.Payment.ID, y.Payment.ID))
	})
	var out []audit.Record
	next := after
	for _, r := range recs {
		at := changedAt(r)
		past := at.After(after.At) || (at.Equal(after.At) && r.Payment.ID > after.ID)
		if past && !at.Before(since) && at.Before(until) && len(out) < limit && (tenantID == "" || r.Payment.TenantID == tenantID) {
			r.Changed = at
			out = append(out, r)
			next = audit.Cursor{Source: audit.SourcePayments, At: at, ID: r.Payment.ID}
		}
	}
	if len(out) < limit {
		next = audit.Cursor{Source: audit.SourceRefunds}
	}
	return out, next, nil
}

func (m *memStore) AuditRecords(_ context.Context, nos []string) ([]audit.Record, error) {
	var out []audit.Record
	for _, r := range m.recs {
		if slices.Contains(nos, r.Payment.PaymentNo) {
			r.Changed = changedAt(r)
			if m.changeOnReread[r.Payment.PaymentNo] {
				r.Changed = r.Changed.Add(time.Second)
			}
			out = append(out, r)
		}
	}
	return out, nil
}

func (m *memStore) AnomalyKinds(context.Context, string) ([]string, error) { return nil, nil }

// slowGateway answers every query as paid for 9.90 after a pause, and records how many
// queries were in flight at most.
type slowGateway struct {
	mu       sync.Mutex
	inFlight int
	max      int
	calls    int
}

func (g *slowGateway) Query(ctx context.Context, paymentNo string) (payment.Trade, error) {
	g.mu.Lock()
	g.inFlight++
	g.calls++
	g.max = max(g.max, g.inFlight)
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.inFlight--
		g.mu.Unlock()
	}()
	select {
	case <-time.After(10 * time.Millisecond):
	case <-ctx.Done():
		return payment.Trade{}, ctx.Err()
	}
	return payment.Trade{State: payment.TradePaid, PaymentNo: paymentNo, TradeNo: "T" + paymentNo, Amount: 990}, nil
}

func closedRecords(n int, createdAt time.Time) []audit.Record {
	recs := make([]audit.Record, n)
	for i := range recs {
		recs[i] = audit.Record{Payment: payment.Payment{ID: int64(i + 1), PaymentNo: fmt.Sprintf("P%03d", i+1), TenantID: "t",
			OrderID: fmt.Sprintf("o%03d", i+1), Amount: 990, Status: payment.StatusClosed, CreatedAt: createdAt, UpdatedAt: createdAt}}
	}
	return recs
}

func TestRun_BoundsConcurrencyAndPages(t *testing.T) {
	now := time.Now()
	st := &memStore{recs: closedRecords(45, now.Add(-time.Hour))}
	gw := &slowGateway{}
	var progress []audit.Progress
	aud := &audit.Auditor{Store: st, Gateway: gw, Workflows: &workflows{}, PageSize: 20}
	rep, err := aud.Run(context.Background(), audit.Params{Since: now.Add(-24 * time.Hour), Until: now,
		Progress: func(p audit.Progress) { progress = append(progress, p) }})
	if err != nil {
		t.Fatal(err)
	}
	if gw.calls != 45 || rep.Queried != 45 || rep.Payments != 45 {
		t.Fatalf("%d queries, report %d queried of %d payments; want 45 each", gw.calls, rep.Queried, rep.Payments)
	}
	if gw.max > audit.DefaultConcurrency || gw.max < 2 {
		t.Fatalf("at most %d queries in flight; want between 2 and %d", gw.max, audit.DefaultConcurrency)
	}
	if st.pages != 3 {
		t.Fatalf("read %d pages of 20 for 45 payments, want 3", st.pages)
	}
	if len(rep.Findings) != 45 || rep.Findings[0].PaymentNo != "P001" || rep.Findings[44].PaymentNo != "P045" {
		t.Fatalf("want every closed payment reported lost, in id order: %d findings", len(rep.Findings))
	}
	if last := progress[len(progress)-1]; len(progress) < 45 || last.Payments != 45 || last.Cursor.Source != audit.SourceEnd {
		t.Fatalf("progress reported %d times, last %+v", len(progress), last)
	}
}

func TestRun_Refusals(t *testing.T) {
	now := time.Now()
	aud := &audit.Auditor{Store: &memStore{}, Gateway: &slowGateway{}, Workflows: &workflows{}}
	tests := []struct {
		name         string
		since, until time.Time
	}{
		{name: "no start", until: now},
		{name: "empty window", since: now, until: now},
		{name: "backwards", since: now, until: now.Add(-time.Hour)},
		{name: "too long", since: now.Add(-audit.MaxWindow - time.Hour), until: now},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := aud.Run(context.Background(), audit.Params{Since: tc.since, Until: tc.until}); payment.ErrorCode(err) != payment.EINVALID {
				t.Fatalf("got %v, want an invalid-window error", err)
			}
		})
	}

	boom := errors.New("connection refused")
	aud.Store = &memStore{err: boom}
	if _, err := aud.Run(context.Background(), audit.Params{Since: now.Add(-time.Hour), Until: now}); !errors.Is(err, boom) {
		t.Fatalf("store failure: %v, want it returned", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	aud.Store = &memStore{recs: closedRecords(3, now.Add(-time.Minute))}
	if _, err := aud.Run(ctx, audit.Params{Since: now.Add(-time.Hour), Until: now}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled run: %v, want context.Canceled rather than unverifiable findings", err)
	}
}

// TestRun_SLABoundaries checks that a threshold reached exactly is not a finding and one
// passed is.
func TestRun_SLABoundaries(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	paid := func(id int64, ago time.Duration, granted bool, ev audit.EventState) audit.Record {
		at := now.Add(-ago)
		return audit.Record{Granted: granted, Event: ev, Payment: payment.Payment{ID: id, PaymentNo: fmt.Sprintf("P%d", id),
			TenantID: "t", OrderID: fmt.Sprintf("o%d", id), Amount: 990, Status: payment.StatusPaid,
			PaidAt: at.Add(-time.Hour), UpdatedAt: at, CreatedAt: at}}
	}
	pending := func(id int64, pastExpiry time.Duration) audit.Record {
		return audit.Record{Payment: payment.Payment{ID: id, PaymentNo: fmt.Sprintf("P%d", id), TenantID: "t",
			OrderID: fmt.Sprintf("o%d", id), Amount: 990, Status: payment.StatusPending,
			ExpireAt: now.Add(-pastExpiry), CreatedAt: now.Add(-pastExpiry - 15*time.Minute)}}
	}
	tests := []struct {
		name string
		rec  audit.Record
		want []string
	}{
		// paid_at is an hour before the local transition (updated_at): the SLAs run from
		// the transition.
		{name: "grant at SLA", rec: paid(1, 10*time.Minute, false, audit.EventSettled)},
		{name: "grant past SLA", rec: paid(2, 10*time.Minute+time.Second, false, audit.EventSettled), want: []string{audit.KindMissingGrant}},
		{name: "event at SLA", rec: paid(3, time.Hour, true, audit.EventOwed)},
		{name: "event past SLA", rec: paid(4, time.Hour+time.Second, true, audit.EventOwed), want: []string{audit.KindUndeliveredEvent}},
		{name: "both past SLA", rec: paid(5, 2*time.Hour, false, audit.EventMissing),
			want: []string{audit.KindMissingGrant, audit.KindUndeliveredEvent}},
		{name: "pending at grace", rec: pending(6, 5*time.Minute)},
		{name: "pending past grace", rec: pending(7, 5*time.Minute+time.Second), want: []string{audit.KindLost, audit.KindStuckPending}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			aud := &audit.Auditor{Store: &memStore{recs: []audit.Record{tc.rec}}, Gateway: &slowGateway{},
				Workflows: &workflows{running: map[string]bool{}}, Now: func() time.Time { return now }}
			rep, err := aud.Run(context.Background(), audit.Params{Since: now.Add(-24 * time.Hour), Until: now.Add(time.Second)})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range rep.Findings {
				got = append(got, f.Kind)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("findings %v, want %v", got, tc.want)
			}
		})
	}
}

// TestRun_RecordsPageByPageAndResumesFromItsCursor stops a run whose third page cannot
// be recorded, then resumes it from the last progress it reported: every finding is
// recorded exactly once over the two attempts.
func TestRun_RecordsPageByPageAndResumesFromItsCursor(t *testing.T) {
	now := time.Now()
	st := &memStore{recs: closedRecords(45, now.Add(-time.Hour))}
	aud := &audit.Auditor{Store: st, Gateway: &slowGateway{}, Workflows: &workflows{}, PageSize: 10}
	recorded := map[string]int{}
	pages := 0
	boom := errors.New("mysql gone")
	record := func(_ context.Context, fs []audit.Finding) error {
		pages++
		if pages == 3 {
			return boom
		}
		for _, f := range fs {
			recorded[f.PaymentNo]++
		}
		return nil
	}
	var last audit.Progress
	p := audit.Params{Since: now.Add(-24 * time.Hour), Until: now, Record: record,
		Progress: func(pr audit.Progress) { last = pr }}
	rep, err := aud.Run(context.Background(), p)
	if !errors.Is(err, boom) {
		t.Fatalf("run with a failing record: %v, want the failure", err)
	}
	if len(recorded) != 20 || len(rep.Findings) != 0 {
		t.Fatalf("recorded %d payments' findings before the failure (report kept %d), want the first two pages' 20 and none kept",
			len(recorded), len(rep.Findings))
	}
	p.After = last.Cursor
	rep, err = aud.Run(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 45 {
		if no := fmt.Sprintf("P%03d", i+1); recorded[no] != 1 {
			t.Fatalf("%s recorded %d times over the two attempts, want once (resumed from %+v)", no, recorded[no], p.After)
		}
	}
	if rep.Payments != 25 || rep.ByKind[audit.KindLost] != 25 {
		t.Fatalf("resumed run: %d payments, by kind %v; want the 25 not recorded yet", rep.Payments, rep.ByKind)
	}
}

// TestRun_DropsTheFindingsOfAPaymentThatChangedWhileAudited: a payment whose latest
// change moved between the read and the record (a refund made meanwhile) is not
// reported from facts half old and half new.
func TestRun_DropsTheFindingsOfAPaymentThatChangedWhileAudited(t *testing.T) {
	now := time.Now()
	st := &memStore{recs: closedRecords(3, now.Add(-time.Hour)), changeOnReread: map[string]bool{"P002": true}}
	aud := &audit.Auditor{Store: st, Gateway: &slowGateway{}, Workflows: &workflows{}}
	rep, err := aud.Run(context.Background(), audit.Params{Since: now.Add(-24 * time.Hour), Until: now})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range rep.Findings {
		got = append(got, f.PaymentNo)
	}
	if fmt.Sprint(got) != "[P001 P003]" || rep.ChangedWhileAudited != 1 || rep.ByKind[audit.KindLost] != 2 {
		t.Fatalf("findings of %v, %d changed while audited, by kind %v; want P001 and P003, 1", got, rep.ChangedWhileAudited, rep.ByKind)
	}
}
