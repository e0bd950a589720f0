package tracing

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Span is one exported span as the file exporter writes it.
type Span struct {
	TraceID  string            `json:"trace_id"`
	SpanID   string            `json:"span_id"`
	ParentID string            `json:"parent_span_id,omitempty"`
	Service  string            `json:"service"`
	Name     string            `json:"name"`
	Kind     string            `json:"kind"`
	Start    time.Time         `json:"start"`
	End      time.Time         `json:"end"`
	Error    string            `json:"error,omitempty"`
	Attrs    map[string]string `json:"attrs,omitempty"`
}

// FromReadOnly converts an SDK span.
func FromReadOnly(s sdktrace.ReadOnlySpan) Span {
	sp := Span{
		TraceID: s.SpanContext().TraceID().String(), SpanID: s.SpanContext().SpanID().String(),
		Name: s.Name(), Kind: s.SpanKind().String(), Start: s.StartTime().UTC(), End: s.EndTime().UTC(),
		Attrs: map[string]string{},
	}
	if p := s.Parent(); p.IsValid() {
		sp.ParentID = p.SpanID().String()
	}
	if v, ok := s.Resource().Set().Value("service.name"); ok {
		sp.Service = v.String()
	}
	if st := s.Status(); st.Code.String() == "Error" {
		sp.Error = st.Description
		if sp.Error == "" {
			sp.Error = "error"
		}
	}
	for _, kv := range s.Attributes() {
		sp.Attrs[string(kv.Key)] = kv.Value.String()
	}
	return sp
}

// fileExporter appends spans to a file, one JSON object per line. Several processes
// may append to the same file: each line is written with one write call. The file is
// kept under maxBytes: the process whose write finds it past the bound renames it to
// path + ".1" (replacing the one before), and every process reopens the path when the
// file it holds is no longer there, so the spans take at most about twice the bound on
// disk. Two processes crossing the bound at once may lose one rotation's worth of spans
// to the other's rename: it is a file for looking into payments, not a record.
type fileExporter struct {
	mu       sync.Mutex
	path     string
	maxBytes int64
	f        *os.File
}

// DefaultTraceFileMaxBytes bounds the span file before it is rotated.
const DefaultTraceFileMaxBytes = 256 << 20

func newFileExporter(path string, maxBytes int64) (*fileExporter, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultTraceFileMaxBytes
	}
	e := &fileExporter{path: path, maxBytes: maxBytes}
	if err := e.open(); err != nil {
		return nil, err
	}
	return e, nil
}

func (e *fileExporter) open() error {
	f, err := os.OpenFile(e.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("tracing: span file: %w", err)
	}
	e.f = f
	return nil
}

// rotate reopens the path if another process rotated the file away, and rotates it
// itself when it is past the bound.
func (e *fileExporter) rotate() error {
	held, err := e.f.Stat()
	if err != nil {
		return fmt.Errorf("tracing: span file: %w", err)
	}
	if cur, err := os.Stat(e.path); err != nil || !os.SameFile(held, cur) {
		_ = e.f.Close()
		return e.open()
	}
	if held.Size() < e.maxBytes {
		return nil
	}
	if err := os.Rename(e.path, e.path+".1"); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("tracing: rotate span file: %w", err)
	}
	_ = e.f.Close()
	return e.open()
}

func (e *fileExporter) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.rotate(); err != nil {
		return err
	}
	for _, s := range spans {
		line, err := json.Marshal(FromReadOnly(s))
		if err != nil {
			return err
		}
		if _, err := e.f.Write(append(line, '\n')); err != nil {
			return fmt.Errorf("tracing: span file: %w", err)
		}
	}
	return nil
}

func (e *fileExporter) Shutdown(context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.f.Close()
}

// ReadSpans reads a span file. A line that does not parse (one cut short by a crash) is
// skipped.
func ReadSpans(r io.Reader) ([]Span, error) {
	var out []Span
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 4<<20)
	for sc.Scan() {
		var s Span
		if json.Unmarshal(sc.Bytes(), &s) == nil && s.TraceID != "" {
			out = append(out, s)
		}
	}
	return out, sc.Err()
}

// workflowIDKey is the attribute the Temporal interceptor puts on its spans.
const workflowIDKey = "temporalWorkflowID"

// TracesOf returns the ids of the traces that touch the workflow workflowID (a
// payment's is payment:<tenant>:<order>), oldest first.
func TracesOf(spans []Span, workflowID string) []string {
	first := map[string]time.Time{}
	for _, s := range spans {
		if s.Attrs[workflowIDKey] != workflowID {
			continue
		}
		if t, ok := first[s.TraceID]; !ok || s.Start.Before(t) {
			first[s.TraceID] = s.Start
		}
	}
	ids := make([]string, 0, len(first))
	for id := range first {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return first[ids[i]].Before(first[ids[j]]) })
	return ids
}

// WriteTree prints the spans of traceID as an indented tree, each span with its
// service, its offset from the trace's start, its duration and its error.
func WriteTree(w io.Writer, spans []Span, traceID string) {
	var mine []Span
	ids := map[string]bool{}
	for _, s := range spans {
		if s.TraceID == traceID {
			mine = append(mine, s)
			ids[s.SpanID] = true
		}
	}
	if len(mine) == 0 {
		return
	}
	sort.Slice(mine, func(i, j int) bool { return mine[i].Start.Before(mine[j].Start) })
	children := map[string][]Span{}
	var roots []Span
	for _, s := range mine {
		if s.ParentID == "" || !ids[s.ParentID] {
			roots = append(roots, s)
		} else {
			children[s.ParentID] = append(children[s.ParentID], s)
		}
	}
	t0 := mine[0].Start
	fmt.Fprintf(w, "trace %s\n", traceID)
	var walk func(s Span, depth int)
	walk = func(s Span, depth int) {
		line := fmt.Sprintf("%s%s  [%s] +%s %s", strings.Repeat("  ", depth+1), s.Name, s.Service,
			s.Start.Sub(t0).Round(time.Millisecond), s.End.Sub(s.Start).Round(time.Microsecond*100))
		if s.Error != "" {
			line += "  ERROR: " + s.Error
		}
		fmt.Fprintln(w, line)
		for _, c := range children[s.SpanID] {
			walk(c, depth+1)
		}
	}
	for _, r := range roots {
		walk(r, 0)
	}
}

// PrintTraces prints as trees the trace traceID or, without it, every trace with a span
// of the workflow workflowID, from the span file at path.
func PrintTraces(out io.Writer, path, workflowID, traceID string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	spans, err := ReadSpans(f)
	if err != nil {
		return err
	}
	ids := []string{traceID}
	if traceID == "" {
		if ids = TracesOf(spans, workflowID); len(ids) == 0 {
			return fmt.Errorf("no span of %s in %s", workflowID, path)
		}
	}
	for _, id := range ids {
		WriteTree(out, spans, id)
	}
	return nil
}
