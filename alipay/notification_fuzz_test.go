package alipay_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paykit/paykit/alipay"
	"github.com/paykit/paykit/payment"
)

// boundary is what the API does with a notification body: parse it (refusing a repeated
// parameter) and verify it with the app's key.
func boundary(gw *alipay.Gateway, raw []byte) (payment.Notification, error) {
	form, err := alipay.ParseNotificationBody(raw)
	if err != nil {
		return payment.Notification{}, err
	}
	return gw.DecodeForm(context.Background(), form)
}

// genuineSet is the genuine notifications signed by the simulator, by notify_id, with
// their bodies as Alipay posts them.
type genuineSet struct {
	gw     *alipay.Gateway
	bodies []string
	byID   map[string]payment.Notification
}

var (
	genuineOnce sync.Once
	genuine     genuineSet
	genuineErr  error
)

// genuineDir holds genuine notification bodies as the simulator signed them with the test
// keys (one payment paid, and a partial refund of it), so that every fuzz worker process
// knows the same ones. Re-record with PAYKIT_RECORD_NOTIFICATIONS=1 go test ./alipay.
var genuineDir = filepath.Join("testdata", "notifications")

func genuineNotifications(tb testing.TB) genuineSet {
	genuineOnce.Do(func() {
		keys := testKeys(tb)
		gw, err := alipay.New(alipay.Config{
			AppID: testAppID, SellerID: testSellerID,
			AppPrivateKeyPEM: keys.AppPrivateKeyPEM, AlipayPublicKeyPEM: keys.AlipayPublicKeyPEM,
			GatewayURL: "http://127.0.0.1:1/gateway.do", NotifyURL: "http://127.0.0.1:1/notify",
		})
		if err != nil {
			genuineErr = err
			return
		}
		files, _ := filepath.Glob(filepath.Join(genuineDir, "*.form"))
		g := genuineSet{gw: gw, byID: map[string]payment.Notification{}}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				genuineErr = err
				return
			}
			body := strings.TrimSpace(string(b))
			n, err := boundary(gw, []byte(body))
			if err != nil {
				genuineErr = fmt.Errorf("genuine notification %s refused: %w", f, err)
				return
			}
			g.bodies = append(g.bodies, body)
			g.byID[n.NotifyID] = n
		}
		if len(g.bodies) < 2 || g.byID[refundID(g)].RefundFee != 234 {
			genuineErr = fmt.Errorf("want a paid and a refund notification (refund_fee 2.34) in %s, found %d", genuineDir, len(g.bodies))
			return
		}
		genuine = g
	})
	if genuineErr != nil {
		tb.Fatal(genuineErr)
	}
	return genuine
}

// TestRecordGenuineNotifications writes the genuine bodies from the simulator (with
// PAYKIT_RECORD_NOTIFICATIONS=1), and otherwise checks that the simulator still signs
// notifications that the recorded ones resemble: the same parameters.
func TestRecordGenuineNotifications(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	no := "P_fuzz_seed"
	if _, err := e.gw.Precreate(ctx, tradeReq(no, 1234)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.sim.Pay("", no, "2088000000000077"); err != nil {
		t.Fatal(err)
	}
	paid := e.sink.next(t, 5*time.Second).form
	if _, err := e.gw.Refund(ctx, payment.RefundRequest{PaymentNo: no, OutRequestNo: "R_fuzz_seed", Amount: 234}); err != nil {
		t.Fatal(err)
	}
	refund := e.sink.next(t, 5*time.Second).form
	fresh := map[string]url.Values{"paid": paid, "refund": refund}
	if os.Getenv("PAYKIT_RECORD_NOTIFICATIONS") != "" {
		if err := os.MkdirAll(genuineDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, f := range fresh {
			if err := os.WriteFile(filepath.Join(genuineDir, name+".form"), []byte(f.Encode()+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	for name, f := range fresh {
		b, err := os.ReadFile(filepath.Join(genuineDir, name+".form"))
		if err != nil {
			t.Fatalf("%v: record with PAYKIT_RECORD_NOTIFICATIONS=1 go test ./alipay -run TestRecordGenuineNotifications", err)
		}
		old, err := url.ParseQuery(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(sortedKeys(old), sortedKeys(f)) {
			t.Fatalf("the simulator's %s notification has parameters %v, the recorded one %v: re-record", name, sortedKeys(f), sortedKeys(old))
		}
	}
}

func sortedKeys(v url.Values) []string {
	var ks []string
	for k := range v {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func refundID(g genuineSet) string {
	for id, n := range g.byID {
		if n.OutBizNo != "" {
			return id
		}
	}
	return ""
}

// holds is the property: a body that the boundary accepts carries exactly the fields of
// the genuine notification it came from.
func (g genuineSet) holds(t *testing.T, raw []byte) {
	n, err := boundary(g.gw, raw)
	if err != nil {
		return
	}
	want, ok := g.byID[n.NotifyID]
	if !ok {
		t.Fatalf("accepted a notification with notify_id %q that Alipay never sent:\n%s", n.NotifyID, raw)
	}
	if !reflect.DeepEqual(n, want) {
		t.Fatalf("accepted a body whose fields differ from the genuine one:\n got %+v\nwant %+v\nbody %s", n, want, raw)
	}
}

// mutations of a genuine body that Alipay never sends: every parameter repeated (first or
// last, with its own value, blank or white space), a blank or white-space extra parameter
// before and after, every value blanked or padded, the order reversed, and encodings of
// the same text changed.
func mutations(body string) []string {
	pairs := strings.Split(body, "&")
	var out []string
	with := func(ps ...[]string) string {
		var all []string
		for _, p := range ps {
			all = append(all, p...)
		}
		return strings.Join(all, "&")
	}
	for i, p := range pairs {
		k, v, _ := strings.Cut(p, "=")
		for _, dup := range []string{k + "=" + v, k + "=", k + "=%20", k + "=%09"} {
			out = append(out, with([]string{dup}, pairs), with(pairs, []string{dup}))
		}
		for _, nv := range []string{"", "%20", "%20" + v, v + "%20", v + "%00", strings.ToUpper(v), strings.ReplaceAll(v, "%20", "+")} {
			m := append([]string{}, pairs...)
			m[i] = k + "=" + nv
			out = append(out, with(m))
		}
		m := append([]string{}, pairs...)
		m[i] = strings.ToUpper(k) + "=" + v
		out = append(out, with(m))
	}
	for _, extra := range []string{"gmt_refund=%20", "notify_id=%20", "trade_no=%20", "refund_fee=0.00", "x=%20", "x="} {
		out = append(out, extra+"&"+body, body+"&"+extra)
	}
	rev := append([]string{}, pairs...)
	sort.Sort(sort.Reverse(sort.StringSlice(rev)))
	out = append(out, with(rev), body+"&", "&"+body, strings.ReplaceAll(body, "&", ";"))
	return out
}

// TestNotificationBoundaryRefusesWhatAlipayNeverSends runs every targeted mutation of the
// genuine bodies through the boundary on every test run: none may change a field, and a
// repeated parameter or a blank or white-space extra one is refused outright.
func TestNotificationBoundaryRefusesWhatAlipayNeverSends(t *testing.T) {
	g := genuineNotifications(t)
	for _, body := range g.bodies {
		for _, m := range mutations(body) {
			g.holds(t, []byte(m))
		}
		pairs := strings.Split(body, "&")
		for _, p := range pairs {
			k, _, _ := strings.Cut(p, "=")
			for _, m := range []string{p + "&" + body, body + "&" + k + "=%20", k + "=%09&" + body} {
				if _, err := boundary(g.gw, []byte(m)); err == nil {
					t.Fatalf("a body that repeats %q was accepted:\n%s", k, m)
				}
			}
		}
		for _, extra := range []string{"notify_id=%09&", "trade_no=%20&"} {
			if _, err := boundary(g.gw, []byte(extra+body)); payment.ErrorCode(err) != payment.EINVALID {
				t.Fatalf("%s + genuine body: %v, want refused as repeated before verifying", extra, err)
			}
		}
		for _, extra := range []string{"&gmt_refund=%20", "&notify_id=%20", "&x=%20"} {
			if _, err := boundary(g.gw, []byte(body+extra)); err == nil {
				t.Fatalf("genuine body + %s was accepted", extra)
			}
		}
	}
}

// FuzzNotificationBoundary mutates genuine signed notifications at random (the test
// command runs it for a bounded time with -fuzz) and holds the same property.
func FuzzNotificationBoundary(f *testing.F) {
	g := genuineNotifications(f)
	for _, body := range g.bodies {
		f.Add([]byte(body))
		for _, m := range mutations(body)[:20] {
			f.Add([]byte(m))
		}
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		g.holds(t, raw)
	})
}
