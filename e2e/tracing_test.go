package e2e

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/paykit/paykit/payment"
)

// otlpSpan is one span as an OTLP collector receives it.
type otlpSpan struct {
	traceID, spanID, parentID, name, service string
	attrs                                    map[string]string
	// links are the "trace id-span id" of the spans it links to.
	links []string
}

// otlpReceiver is a minimal OTLP/HTTP trace collector: it accepts the protobuf export
// requests the processes post to /v1/traces and keeps their spans.
type otlpReceiver struct {
	url   string
	mu    sync.Mutex
	spans []otlpSpan
}

func startOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &otlpReceiver{url: "http://" + ln.Addr().String()}
	srv := &http.Server{Handler: http.HandlerFunc(r.serve)}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return r
}

func (r *otlpReceiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path != "/v1/traces" || req.Method != http.MethodPost {
		http.NotFound(w, req)
		return
	}
	body, err := io.ReadAll(req.Body)
	var in collectortrace.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(body, &in)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	for _, rs := range in.ResourceSpans {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				service = kv.Value.GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				sp := otlpSpan{traceID: hex.EncodeToString(s.TraceId), spanID: hex.EncodeToString(s.SpanId),
					parentID: hex.EncodeToString(s.ParentSpanId), name: s.Name, service: service, attrs: map[string]string{}}
				for _, kv := range s.Attributes {
					sp.attrs[kv.Key] = kv.Value.GetStringValue()
				}
				for _, l := range s.Links {
					sp.links = append(sp.links, hex.EncodeToString(l.TraceId)+"-"+hex.EncodeToString(l.SpanId))
				}
				r.spans = append(r.spans, sp)
			}
		}
	}
	r.mu.Unlock()
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// trace returns the spans received so far of one trace.
func (r *otlpReceiver) trace(traceID string) []otlpSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []otlpSpan
	for _, s := range r.spans {
		if s.traceID == traceID {
			out = append(out, s)
		}
	}
	return out
}

// TestOneTracePerPayment follows one payment from the merchant's checkout, sent with a
// W3C traceparent whose flags say not sampled, to PAID and its webhook, and finds every
// step in one trace of paykit's own, answered in X-Trace-Id, each span a descendant of
// the API's root span, which links to the merchant's: the API request, the Temporal
// update that starts the workflow, the workflow and each activity, the Alipay call, MySQL
// and Redis, and the webhook to the merchant. The worker's log lines of the workflow's
// activities carry the trace id.
func TestOneTracePerPayment(t *testing.T) {
	rcv := startOTLPReceiver(t)
	st := newStack(t, stackOptions{extraEnv: []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + rcv.url,
		"OTEL_BSP_SCHEDULE_DELAY=100",
	}})
	tn := newTenant(t)
	merchantTrace, merchantSpan := randHex(16), randHex(8)
	body := order("trace-1", 1200)
	body["method"] = "qr" // the checkout itself calls Alipay (alipay.trade.precreate)
	b, _ := json.Marshal(body)
	r := do(t, http.MethodPost, st.apiURL+"/v1/payments", map[string]string{
		"Authorization": "Bearer " + tn.apiKey, "Content-Type": "application/json", "Idempotency-Key": "trace-" + randHex(4),
		"Traceparent": "00-" + merchantTrace + "-" + merchantSpan + "-00",
	}, b)
	if r.status != http.StatusCreated {
		t.Fatalf("checkout: HTTP %d %s", r.status, r.body)
	}
	traceID := r.header.Get("X-Trace-Id")
	if len(traceID) != 32 || traceID == merchantTrace {
		t.Fatalf("X-Trace-Id = %q, want a trace of paykit's own (the merchant's is %s)", traceID, merchantTrace)
	}
	var res checkoutResult
	r.json(t, &res)
	simPay(t, res.PaymentNo)
	waitStatus(t, res.PaymentNo, payment.StatusPaid, 30*time.Second)
	final := waitWorkflowClosed(t, payment.WorkflowID(tn.id, "trace-1"), 30*time.Second)
	if !final.BenefitGranted || !final.WebhookSent {
		t.Fatalf("workflow result %+v", final)
	}

	// Each step, by the span that shows it.
	want := map[string]func(otlpSpan) bool{
		"the API request": func(s otlpSpan) bool {
			return s.name == "POST /v1/payments" && s.parentID == "" && slices.Equal(s.links, []string{merchantTrace + "-" + merchantSpan})
		},
		"the workflow's start":  func(s otlpSpan) bool { return s.name == "UpdateWithStartWorkflow:checkout" },
		"the workflow":          func(s otlpSpan) bool { return s.name == "RunWorkflow:PaymentWorkflow" },
		"CreatePayment":         func(s otlpSpan) bool { return s.name == "RunActivity:CreatePayment" },
		"OpenTrade":             func(s otlpSpan) bool { return s.name == "RunActivity:OpenTrade" },
		"the Alipay call":       func(s otlpSpan) bool { return s.name == "alipay.trade.precreate" },
		"MarkPaid":              func(s otlpSpan) bool { return s.name == "RunActivity:MarkPaid" },
		"GrantBenefit":          func(s otlpSpan) bool { return s.name == "RunActivity:GrantBenefit" },
		"DeliverWebhook":        func(s otlpSpan) bool { return s.name == "RunActivity:DeliverWebhook" },
		"the merchant webhook":  func(s otlpSpan) bool { return s.name == "webhook POST" },
		"a MySQL call (API)":    func(s otlpSpan) bool { return s.service == "paykit-api" && s.attrs["db.system.name"] == "mysql" },
		"a MySQL call (worker)": func(s otlpSpan) bool { return s.service == "paykit-worker" && s.attrs["db.system.name"] == "mysql" },
		"a Redis call":          func(s otlpSpan) bool { return s.attrs["db.system"] == "redis" || s.attrs["db.system.name"] == "redis" },
	}
	var spans []otlpSpan
	missing := []string{}
	deadline := time.Now().Add(15 * time.Second)
	for {
		spans = rcv.trace(traceID)
		missing = missing[:0]
		for what, match := range want {
			found := false
			for _, s := range spans {
				if match(s) {
					found = true
					break
				}
			}
			if !found {
				missing = append(missing, what)
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if len(missing) > 0 {
		names := []string{}
		for _, s := range spans {
			names = append(names, s.service+":"+s.name)
		}
		t.Fatalf("trace %s lacks %v; it has %d spans: %v", traceID, missing, len(spans), names)
	}
	// One tree: every span's parent is in the trace, but for the API's root span.
	ids := map[string]bool{"": true}
	for _, s := range spans {
		ids[s.spanID] = true
	}
	for _, s := range spans {
		if !ids[s.parentID] {
			t.Errorf("span %s (%s) hangs off %q, outside the trace", s.name, s.service, s.parentID)
		}
	}
	// The worker's lines about the payment's activities carry the trace id.
	for _, msg := range []string{"webhook delivered"} {
		if !logHas(t, st.worker.logPath, func(line string) bool {
			return strings.Contains(line, `"msg":"`+msg+`"`) && strings.Contains(line, res.PaymentNo)
		}, traceID) {
			t.Errorf("worker log: no %q line of %s with trace_id %s", msg, res.PaymentNo, traceID)
		}
	}
	if !logHas(t, st.api.logPath, func(line string) bool {
		return strings.Contains(line, `"msg":"http request"`) && strings.Contains(line, `"route":"/v1/payments"`)
	}, traceID) {
		t.Errorf("api log: no checkout line with trace_id %s", traceID)
	}
}

// logHas reports whether some line of the log at path that match selects carries the
// trace id.
func logHas(t *testing.T, path string, match func(string) bool, traceID string) bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		if line := sc.Text(); match(line) && strings.Contains(line, `"trace_id":"`+traceID+`"`) {
			return true
		}
	}
	return false
}
