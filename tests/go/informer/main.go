// Command informer plays each source of one reconcile-loop trace (the JSON Lines format
// of trace/src/lib.rs) to client-go's own informer, one informer a source, and prints what
// each did as JSON: the LIST and WATCH requests its Reflector made, the handler
// notifications in order, and the final store. It is one side of the differential check of
// issue 30 (sim/tests/client_go_diff.rs is the other side and the comparison).
//
// Sources. The primary's records are those without a "source"; secondary n's (version 2
// traces, the header's nth entry of "secondaries") name it. Each source gets its own
// informer and scripted ListerWatcher, fed that source's LIST and WATCH answers only. A
// secondary is decoded as metadata (metav1.PartialObjectMetadata, what the core decodes a
// secondary into and what client-go's metadata client asks for), and each of its objects is
// mapped to parents by its header's parents_by as controller-runtime's
// EnqueueRequestForOwner maps it (parentsOf): the output gives those parents per
// notification and per store entry.
//
// The informer is cache.NewInformerWithOptions of the pinned client-go (v0.36.3): the real
// Reflector, the queue newQueueFIFO picks by default (a RealFIFO: InOrderInformers is GA and
// locked on in 1.36, AtomicFIFO and UnlockWhileProcessingFIFO are beta and on, so a LIST
// is one atomic ReplacedAll delta; no DeltaFIFO), processDeltas / processDeltasInBatch into
// the informer's Store, and a handler that records each OnAdd / OnUpdate / OnDelete.
//
// The trace's answers are served by a scripted ListerWatcher: LIST answers in trace order,
// WATCH answers in trace order, each WATCH answer being its status and then the frames the
// trace delivered on that stream, ended as the trace ends it. When a kind's answers are used
// up the call blocks until the harness stops, so an exhausted trace leaves the reflector idle.
//
// Wire. A trace recorded on protobuf (`"wire_format":"protobuf"`) is played as it was
// received: an enveloped protobuf LIST body (`k8s\0`, a runtime.Unknown) or Status, and a
// watch frame that does not start with '{' (a metav1.WatchEvent whose object is enveloped),
// are decoded with client-go's scheme and the apimachinery protobuf serializer, as a clientset
// asking for application/vnd.kubernetes.protobuf decodes them; any answer in JSON (a world
// answers every 7th that way) is read as JSON, by its first byte.
//
// Time. Nothing that changes the output depends on the clock: the answers are served in
// order as the reflector asks, and a request is recorded only once every object queued before
// it has been handed to the handler (counted through the informer's Transform, which the
// RealFIFO calls once per queued object). The informer API lets a caller set neither the
// reflector's clock nor its backoff, so the harness the tests run (informer_test.go, this
// package built by `go test -c`) plays inside a testing/synctest bubble: the reflector's
// clock is virtual, its backoffs before a relist pass at once, and its "very short watch"
// check (a clean end under 1 s with no event) is made to see what the trace saw: a watch the
// trace kept open 1 s or more with no frame is held open 1.1 s (virtual) before it ends.
// Everything in the bubble blocks on channels, sync.Cond or timers (durably), never on I/O.
// `go run . TRACE.jsonl` plays the same on the real clock.
//
// Usage: informer TRACE.jsonl   (the test binary build.sh builds; exit 0 with JSON on stdout; 2 on a bad trace; 3 on a
// trace this harness cannot play, with the reason on stderr; 1 when the play fails)
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// How long the whole play may take on the clock it runs on before it is abandoned (a bound,
// never reached by a trace that plays out): real time under main, virtual time in the
// synctest bubble of informer_test.go, where a day of the reflector's backoffs takes
// milliseconds.
const (
	realPlayBound    = 120 * time.Second
	virtualPlayBound = 24 * time.Hour
)

// line is every field of a trace line this harness reads.
type line struct {
	Record         *string          `json:"record"`
	T              *float64         `json:"t"`
	Status         *int             `json:"status"`
	Body           json.RawMessage  `json:"body"`
	RawBody        *string          `json:"raw_body"`
	BodyBase64     *string          `json:"body_base64"`
	TransportError *string          `json:"transport_error"`
	Raw            *string          `json:"raw"`
	RawBase64      *string          `json:"raw_base64"`
	Event          json.RawMessage  `json:"event"`
	End            *string          `json:"end"`
	Error          *string          `json:"error"`
	Source         *json.RawMessage `json:"source"`
	Note           *string          `json:"note"`
	Fault          *string          `json:"fault"`
	// Header fields.
	Version        *int    `json:"reconcile_sim_trace"`
	HeaderSource   *string `json:"-"`
	StreamingLists *bool   `json:"streaming_lists"`
	WireFormat     *string `json:"wire_format"`
}

type listAnswer struct {
	line      int
	status    int
	body      []byte
	transport string
}

type frame struct {
	t   float64
	raw []byte
}

type watchAnswer struct {
	line   int
	t      float64
	status int
	body   []byte
	frames []frame
	// ended: false when the trace leaves the stream open.
	ended bool
	// headError: the request failed before any response head (a recorder writes that as a
	// 200 with a note, then the transport error): the WATCH call itself fails.
	headError  string
	beforeHead bool
	endT       float64
}

// Request is one LIST or WATCH the reflector made.
type Request struct {
	Verb            string `json:"verb"`
	ResourceVersion string `json:"resource_version"`
	// SendInitialEvents is set on a WATCH that asks for a streaming list.
	SendInitialEvents bool   `json:"send_initial_events,omitempty"`
	Limit             int64  `json:"limit,omitempty"`
	Continue          string `json:"continue,omitempty"`
	// Answer is the trace line that answered it, 0 when none was left.
	Answer int `json:"answer"`
}

// Notification is one handler call.
type Notification struct {
	// After is how many requests had been made when it was recorded: the answer to
	// request After-1 caused it.
	After int    `json:"after"`
	Kind  string `json:"kind"` // add, update, delete
	Key   string `json:"key"`
	RV    string `json:"rv"`
	// OldRV is an update's old object's resourceVersion.
	OldRV string `json:"old_rv,omitempty"`
	// OldLabels / Labels: the objects' labels, for the parent mapping.
	OldLabels map[string]string `json:"old_labels,omitempty"`
	Labels    map[string]string `json:"labels"`
	// OldOwner / Owner: the objects' controller owner as Kind/name, for the owner key map.
	OldOwner string `json:"old_owner,omitempty"`
	Owner    string `json:"owner,omitempty"`
	// OldParents / Parents: for a secondary, the parents its key map maps the objects to
	// (parentsOf); a delete's Parents are those of the object it carries.
	OldParents []string `json:"old_parents,omitempty"`
	Parents    []string `json:"parents,omitempty"`
	// Tombstone: a delete handed a cache.DeletedFinalStateUnknown.
	Tombstone     bool `json:"tombstone,omitempty"`
	InInitialList bool `json:"in_initial_list,omitempty"`
}

// StoreEntry is one object of the final store.
type StoreEntry struct {
	RV     string            `json:"rv"`
	Labels map[string]string `json:"labels"`
	Owner  string            `json:"owner,omitempty"`
	// Parents: for a secondary, the parents its key map maps the object to.
	Parents []string `json:"parents,omitempty"`
}

// SourceOutput is what one source's informer did.
type SourceOutput struct {
	// ParentsBy: a secondary's key map as the header writes it (the parents of each
	// notification and store entry are computed by it); empty for the primary.
	ParentsBy     string                `json:"parents_by,omitempty"`
	Requests      []Request             `json:"requests"`
	Notifications []Notification        `json:"notifications"`
	Store         map[string]StoreEntry `json:"store"`
	LastSyncRV    string                `json:"last_sync_resource_version"`
	// Unplayed counts the answers the reflector never asked for.
	UnplayedLists   int `json:"unplayed_lists"`
	UnplayedWatches int `json:"unplayed_watches"`
}

// Output is what the harness prints: the primary's informer at the top level, each
// secondary's in Secondaries, in the header's order.
type Output struct {
	Informer string `json:"informer"`
	SourceOutput
	Secondaries []SourceOutput `json:"secondaries"`
}

type cannotPlay struct{ why string }

func (c cannotPlay) Error() string { return c.why }

func payload(l *line, what string) ([]byte, error) {
	switch {
	case l.Body != nil:
		return []byte(l.Body), nil
	case l.RawBody != nil:
		return []byte(*l.RawBody), nil
	case l.BodyBase64 != nil:
		return base64.StdEncoding.DecodeString(*l.BodyBase64)
	}
	return nil, fmt.Errorf("%s without a body", what)
}

// source is one source of a trace as this harness plays it: its LIST and WATCH answers in
// trace order, and how its informer decodes and keys its objects.
type source struct {
	lists   []*listAnswer
	watches []*watchAnswer
	// kind: the kind the primary's objects are kept as (from its LIST answers, Pod by
	// default); a secondary's are PartialObjectMetadata.
	kind string
	// streaming: the source's listings are streaming lists (WATCH with sendInitialEvents).
	streaming bool
	// metadata: a secondary, decoded as metadata only (metav1.PartialObjectMetadata), as
	// the core decodes it and as client-go's metadata client does.
	metadata bool
	// parentsBy: a secondary's key map, as the trace header writes it (owner:<kind>,
	// any-owner:<kind> or custom); empty for the primary.
	parentsBy string
}

// sourceIndex is the source a record names: 0 (the primary) without one.
func sourceIndex(raw *json.RawMessage) (int, error) {
	if raw == nil || string(*raw) == "null" {
		return 0, nil
	}
	var n int
	if err := json.Unmarshal(*raw, &n); err != nil || n < 0 {
		return 0, fmt.Errorf("source %s", string(*raw))
	}
	return n, nil
}

// readTrace reads every source of the trace: the primary first, then each secondary the
// header lists, in its order.
func readTrace(path string) (sources []*source, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<30)
	n := 0
	var open []*watchAnswer
	for sc.Scan() {
		n++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		var l line
		if err := json.Unmarshal([]byte(text), &l); err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, n, err)
		}
		if n == 1 {
			var h map[string]json.RawMessage
			_ = json.Unmarshal([]byte(text), &h)
			if s, ok := h["source"]; ok && strings.Contains(string(s), "in_process") {
				return nil, cannotPlay{"an in-process source: no LIST or WATCH to play"}
			}
			if l.WireFormat != nil && *l.WireFormat != "json" && *l.WireFormat != "protobuf" {
				return nil, cannotPlay{"wire format " + *l.WireFormat}
			}
			sources = []*source{{kind: "Pod", streaming: l.StreamingLists != nil && *l.StreamingLists}}
			var header struct {
				Secondaries []struct {
					ParentsBy      string  `json:"parents_by"`
					StreamingLists bool    `json:"streaming_lists"`
					WireFormat     *string `json:"wire_format"`
				} `json:"secondaries"`
			}
			if err := json.Unmarshal([]byte(text), &header); err != nil {
				return nil, fmt.Errorf("%s:%d: %v", path, n, err)
			}
			for _, s := range header.Secondaries {
				if s.WireFormat != nil && *s.WireFormat != "json" && *s.WireFormat != "protobuf" {
					return nil, cannotPlay{"a secondary's wire format " + *s.WireFormat}
				}
				sources = append(sources, &source{kind: "PartialObjectMetadata", streaming: s.StreamingLists, metadata: true, parentsBy: s.ParentsBy})
			}
			open = make([]*watchAnswer, len(sources))
			continue
		}
		if l.Record == nil {
			return nil, fmt.Errorf("%s:%d: no record", path, n)
		}
		at, err := sourceIndex(l.Source)
		if err != nil || at >= len(sources) {
			return nil, fmt.Errorf("%s:%d: a source the header does not list", path, n)
		}
		src := sources[at]
		t := 0.0
		if l.T != nil {
			t = *l.T
		}
		switch *l.Record {
		case "fault":
			// A recording keeps the faults that acted on the controller, not on the
			// conversation: a jump of its clock, which moves no answer here (they are served
			// in order, as the reflector asks).
			if l.Fault != nil && *l.Fault == "clock_jump" {
				continue
			}
			return nil, cannotPlay{"a world-mode trace (fault records): its conversation is made by the simulated apiserver; play its recording (reconcile_sim::simulate_recorded)"}
		case "list":
			a := &listAnswer{line: n, status: 200}
			if l.Status != nil {
				a.status = *l.Status
			}
			if l.TransportError != nil {
				a.transport = *l.TransportError
			} else if a.body, err = payload(&l, "list"); err != nil {
				return nil, fmt.Errorf("%s:%d: %v", path, n, err)
			}
			if a.status == 200 && a.transport == "" && !src.metadata {
				var head struct {
					Kind string `json:"kind"`
				}
				if json.Unmarshal(a.body, &head) == nil && strings.HasSuffix(head.Kind, "List") {
					src.kind = strings.TrimSuffix(head.Kind, "List")
				}
			}
			src.lists = append(src.lists, a)
		case "watch":
			a := &watchAnswer{line: n, t: t, status: 200}
			a.beforeHead = l.Note != nil && strings.Contains(*l.Note, "before the response head")
			if l.Status != nil {
				a.status = *l.Status
			}
			if a.status != 200 {
				if a.body, err = payload(&l, "watch"); err != nil {
					a.body = nil
				}
				a.ended = true
				a.endT = t
				open[at] = nil
			} else {
				open[at] = a
			}
			src.watches = append(src.watches, a)
		case "frame":
			if open[at] == nil {
				return nil, fmt.Errorf("%s:%d: a frame with no open watch", path, n)
			}
			var raw []byte
			switch {
			case l.Raw != nil:
				raw = []byte(*l.Raw)
			case l.RawBase64 != nil:
				raw, err = base64.StdEncoding.DecodeString(*l.RawBase64)
				if err != nil {
					return nil, fmt.Errorf("%s:%d: %v", path, n, err)
				}
			case l.Event != nil:
				raw = []byte(l.Event)
			}
			open[at].frames = append(open[at].frames, frame{t: t, raw: raw})
		case "watch_end":
			w := open[at]
			if w == nil {
				continue // an end after the recorded client closed the stream itself
			}
			w.ended = true
			w.endT = t
			if w.beforeHead && len(w.frames) == 0 && l.Error != nil {
				w.headError = *l.Error
			}
			open[at] = nil
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if sources == nil {
		return nil, fmt.Errorf("%s: no header", path)
	}
	return sources, nil
}

// The typed client's protobuf decoder (client-go's scheme; what a clientset built with
// ContentType application/vnd.kubernetes.protobuf decodes with).
var protobufDecoder = protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)

// isProtobuf: an enveloped protobuf body (its magic, k8s and a NUL). A protobuf source may
// still be answered in JSON, which starts with '{'.
func isProtobuf(body []byte) bool { return bytes.HasPrefix(body, []byte("k8s\x00")) }

// decodeProtobuf reads an enveloped protobuf body as the typed client would, into the type
// its envelope names.
func decodeProtobuf(body []byte) (runtime.Object, error) {
	obj, _, err := protobufDecoder.Decode(body, nil, nil)
	return obj, err
}

// unstructuredOf is a typed object as the Unstructured of the trace's kind the store keeps.
func unstructuredOf(obj runtime.Object, kind string) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion("v1")
	u.SetKind(kind)
	return u, nil
}

// statusError is what client-go's REST client makes of a non-200 answer with a body.
func statusError(status int, body []byte, verb string) error {
	if isProtobuf(body) {
		if obj, err := decodeProtobuf(body); err == nil {
			if st, ok := obj.(*metav1.Status); ok {
				if st.Code == 0 {
					st.Code = int32(status)
				}
				return &apierrors.StatusError{ErrStatus: *st}
			}
		}
	}
	var st metav1.Status
	if err := json.Unmarshal(body, &st); err == nil && st.Kind == "Status" {
		if st.Code == 0 {
			st.Code = int32(status)
		}
		return &apierrors.StatusError{ErrStatus: st}
	}
	return apierrors.NewGenericServerResponse(status, verb, schema.GroupResource{Resource: "pods"}, "", string(body), 0, true)
}

// The metadata client's types: PartialObjectMetadata and its list in meta.k8s.io/v1, and
// the unversioned Status an ERROR event or a failed request carries (what
// k8s.io/client-go/metadata decodes a metadata-only source's answers into).
var metaScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	metav1.AddMetaToScheme(s)
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	return s
}()

var metaProtobufDecoder = protobuf.NewSerializer(metaScheme, metaScheme)

// decodeProtobufFor reads an enveloped protobuf body of the source: a pod or Status through
// client-go's scheme for the primary, PartialObjectMetadata or Status through the metadata
// client's for a secondary.
func decodeProtobufFor(body []byte, metadata bool) (runtime.Object, error) {
	if metadata {
		obj, _, err := metaProtobufDecoder.Decode(body, nil, nil)
		return obj, err
	}
	return decodeProtobuf(body)
}

// decodeObject reads one object as the typed client would (a decode failure of the typed
// Pod, or for a metadata source of the PartialObjectMetadata, is a decode failure) and keeps
// it as an Unstructured of the source's kind.
func decodeObject(raw []byte, kind string, metadata bool) (*unstructured.Unstructured, error) {
	switch {
	case metadata:
		var p metav1.PartialObjectMetadata
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, err
		}
	case kind == "Pod":
		var p corev1.Pod
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, err
		}
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, errors.New("not an object")
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion("v1")
	u.SetKind(kind)
	return u, nil
}

// harness is the scripted ListerWatcher and the recorder.
type harness struct {
	kind string
	// metadata, parentsBy: a secondary source (see source).
	metadata  bool
	parentsBy string
	// streaming: the trace's listings are streaming lists (WATCH with sendInitialEvents).
	streaming bool
	mu        sync.Mutex
	cond      *sync.Cond
	// queued: objects the FIFO transformed (queued); handled: non-tombstone handler calls.
	queued, handled int
	seen            map[*unstructured.Unstructured]bool
	requests        []Request
	notes           []Notification
	lists           []*listAnswer
	watches         []*watchAnswer
	stopped         bool
	// expect: objects the answers played so far must have queued (one per listed item,
	// one per ADDED, MODIFIED or DELETED frame).
	expect int
	// parked: the reflector waits on something the trace will never give (no answer of
	// the kind it asked for is left, or the last stream stays open).
	parked bool
	// initial: a streaming list is gathering its initial events (until its end bookmark
	// is delivered, or the reflector's next request).
	initial bool
	// pendingPages: the keys of the items of the pages of a listing not yet whole (see
	// listed).
	pendingPages []string
	// store: the informer's store, which a listing replaces.
	store cache.Store
	// goneExpected, gone: the objects a listing deletes (held, and not in it: handed to the
	// handler as DeletedFinalStateUnknown), and the tombstones handled.
	goneExpected, gone int
}

// quiet: everything the reflector was handed is queued, and everything queued is handled.
func (h *harness) quiet() bool {
	return h.queued >= h.expect && h.handled >= h.queued && h.gone >= h.goneExpected
}

// replacing counts, for a listing of keys about to replace the store, the objects it
// deletes: those the store holds that the listing lacks. The store is up to date: the
// request the listing answers was made once everything queued before it was handled.
func (h *harness) replacing(keys []string) {
	listed := make(map[string]bool, len(keys))
	for _, k := range keys {
		listed[k] = true
	}
	for _, k := range h.store.ListKeys() {
		if !listed[k] {
			h.goneExpected++
		}
	}
}

// transform counts each object once, however often it is transformed: a streaming list's
// objects are transformed into the reflector's temporary store and again by the queue's
// Replace (client-go requires an idempotent transform for this). While a streaming list
// gathers its initial events (initial), nothing is counted: they reach the queue only with
// the end bookmark's Replace, where they are counted, and never if the stream breaks first.
func (h *harness) transform(obj any) (any, error) {
	h.mu.Lock()
	if h.initial {
		h.mu.Unlock()
		return obj, nil
	}
	if u, ok := obj.(*unstructured.Unstructured); !ok || !h.seen[u] {
		if ok {
			h.seen[u] = true
		}
		h.queued++
	}
	h.mu.Unlock()
	return obj, nil
}

// request waits until everything queued so far has been handled, then records r.
func (h *harness) request(ctx context.Context, r Request) {
	h.mu.Lock()
	// A new request: the reflector is done with the last stream, a streaming list's
	// initial events included.
	h.initial = false
	for !h.quiet() && !h.stopped {
		h.cond.Wait()
	}
	h.requests = append(h.requests, r)
	h.mu.Unlock()
}

func (h *harness) park() {
	h.mu.Lock()
	h.parked = true
	h.cond.Broadcast()
	h.mu.Unlock()
}

func (h *harness) block(ctx context.Context) {
	h.park()
	<-ctx.Done()
}

func (h *harness) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	r := Request{Verb: "LIST", ResourceVersion: opts.ResourceVersion, Limit: opts.Limit, Continue: opts.Continue}
	h.request(ctx, r)
	h.mu.Lock()
	if opts.Continue == "" {
		// A new listing: the pages of one left unfinished are never queued.
		h.pendingPages = nil
	}
	if len(h.lists) == 0 {
		h.mu.Unlock()
		h.block(ctx)
		return nil, ctx.Err()
	}
	a := h.lists[0]
	h.lists = h.lists[1:]
	h.requests[len(h.requests)-1].Answer = a.line
	h.mu.Unlock()
	if a.transport != "" {
		return nil, errors.New(a.transport)
	}
	if a.status != 200 {
		return nil, statusError(a.status, a.body, "list")
	}
	if isProtobuf(a.body) {
		return h.protobufList(a.body)
	}
	var body struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
			Continue        string `json:"continue"`
		} `json:"metadata"`
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(a.body, &body); err != nil {
		return nil, fmt.Errorf("decoding the list: %w", err)
	}
	list := &unstructured.UnstructuredList{Object: map[string]any{}}
	list.SetAPIVersion("v1")
	list.SetKind(h.kind + "List")
	list.SetResourceVersion(body.Metadata.ResourceVersion)
	list.SetContinue(body.Metadata.Continue)
	for i, raw := range body.Items {
		u, err := decodeObject(raw, h.kind, h.metadata)
		if err != nil {
			// The typed client decodes a LIST whole: one bad item fails it.
			return nil, fmt.Errorf("decoding items[%d]: %w", i, err)
		}
		list.Items = append(list.Items, *u)
	}
	h.listed(list.Items, body.Metadata.Continue != "")
	return list, nil
}

// listed counts a LIST answer's items as expected once its listing is whole: client-go's
// pager gathers the pages and the reflector queues them all at the last one, so the items of
// a page with a continue token wait for the pages after it (and are dropped with a listing
// that is never finished: see ListWithContext).
//
// A listing replaces the store, so the objects held and not listed are deleted, handed to
// the handler as tombstones: those are expected too (replacing), or a LIST that deletes
// and adds nothing would let the next request be made before its deletes were handled.
func (h *harness) listed(items []unstructured.Unstructured, more bool) {
	h.mu.Lock()
	for i := range items {
		h.pendingPages = append(h.pendingPages, keyOf(&items[i]))
	}
	if !more {
		h.expect += len(h.pendingPages)
		h.replacing(h.pendingPages)
		h.pendingPages = nil
	}
	h.mu.Unlock()
}

// protobufList decodes a protobuf LIST answer as the typed client does: whole, into the
// list type its envelope names (a PodList; a PartialObjectMetadataList for a secondary),
// then kept as Unstructured like a JSON one.
func (h *harness) protobufList(body []byte) (runtime.Object, error) {
	obj, err := decodeProtobufFor(body, h.metadata)
	if err != nil {
		return nil, fmt.Errorf("decoding the list: %w", err)
	}
	if h.metadata {
		metas, ok := obj.(*metav1.PartialObjectMetadataList)
		if !ok {
			return nil, fmt.Errorf("decoding the list: a %T, not a PartialObjectMetadataList", obj)
		}
		list := &unstructured.UnstructuredList{Object: map[string]any{}}
		list.SetAPIVersion("v1")
		list.SetKind(h.kind + "List")
		list.SetResourceVersion(metas.ResourceVersion)
		list.SetContinue(metas.Continue)
		for i := range metas.Items {
			u, err := unstructuredOf(&metas.Items[i], h.kind)
			if err != nil {
				return nil, fmt.Errorf("decoding items[%d]: %w", i, err)
			}
			list.Items = append(list.Items, *u)
		}
		h.listed(list.Items, metas.Continue != "")
		return list, nil
	}
	pods, ok := obj.(*corev1.PodList)
	if !ok {
		return nil, fmt.Errorf("decoding the list: a %T, not a PodList", obj)
	}
	list := &unstructured.UnstructuredList{Object: map[string]any{}}
	list.SetAPIVersion("v1")
	list.SetKind(h.kind + "List")
	list.SetResourceVersion(pods.ResourceVersion)
	list.SetContinue(pods.Continue)
	for i := range pods.Items {
		u, err := unstructuredOf(&pods.Items[i], h.kind)
		if err != nil {
			return nil, fmt.Errorf("decoding items[%d]: %w", i, err)
		}
		list.Items = append(list.Items, *u)
	}
	h.listed(list.Items, pods.Continue != "")
	return list, nil
}

func (h *harness) List(opts metav1.ListOptions) (runtime.Object, error) {
	return h.ListWithContext(context.Background(), opts)
}

func (h *harness) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return h.WatchWithContext(context.Background(), opts)
}

// IsWatchListSemanticsUnSupported makes the reflector LIST then WATCH, as the traces were
// recorded, unless the trace's header says its listings are streaming lists
// (WatchListClient is on by default in 1.36; see the streaming list row of
// docs/alignment.md: ours is opt-in).
func (h *harness) IsWatchListSemanticsUnSupported() bool { return !h.streaming }

func (h *harness) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	send := opts.SendInitialEvents != nil && *opts.SendInitialEvents
	h.request(ctx, Request{Verb: "WATCH", ResourceVersion: opts.ResourceVersion, SendInitialEvents: send})
	h.mu.Lock()
	if len(h.watches) == 0 {
		h.mu.Unlock()
		h.block(ctx)
		return nil, ctx.Err()
	}
	a := h.watches[0]
	h.watches = h.watches[1:]
	h.requests[len(h.requests)-1].Answer = a.line
	h.mu.Unlock()
	if a.status != 200 {
		return nil, statusError(a.status, a.body, "watch")
	}
	if a.headError != "" {
		// What the REST client returns for a failed dial; "connection refused" as the
		// syscall error, which the reflector tells apart (utilnet.IsConnectionRefused).
		var cause error = errors.New(a.headError)
		if strings.Contains(a.headError, "connection refused") {
			cause = os.NewSyscallError("connect", syscall.ECONNREFUSED)
		}
		return nil, &url.Error{Op: "Get", URL: "https://apiserver/api/v1/pods?watch=true", Err: &net.OpError{Op: "dial", Net: "tcp", Err: cause}}
	}
	w := &scripted{ch: make(chan watch.Event), stop: make(chan struct{})}
	h.mu.Lock()
	h.initial = send
	h.mu.Unlock()
	go h.play(ctx, a, w, send)
	return w, nil
}

// play delivers a WATCH answer's frames as client-go's StreamWatcher would decode them.
func (h *harness) play(ctx context.Context, a *watchAnswer, w *scripted, initial bool) {
	// A streaming list's initial events are expected only once its end bookmark comes.
	var pending []string
	send := func(ev watch.Event) bool {
		if ev.Type == watch.Added || ev.Type == watch.Modified || ev.Type == watch.Deleted {
			h.mu.Lock()
			if initial {
				pending = append(pending, keyOf(ev.Object))
			} else {
				h.expect++
			}
			h.mu.Unlock()
		}
		select {
		case w.ch <- ev:
			return true
		case <-w.stop:
			return false
		case <-ctx.Done():
			return false
		}
	}
	// The channel is unbuffered: a send returns once the reflector took the event.
	// An ERROR event or a decode failure stops the stream as the StreamWatcher does.
	for _, f := range a.frames {
		ev, stop := h.decodeFrame(f.raw)
		if initial && ev.Type == watch.Bookmark && strings.Contains(string(f.raw), "k8s.io/initial-events-end") {
			// The reflector Replaces its queue with what it gathered: counted from here.
			initial = false
			h.mu.Lock()
			h.initial = false
			h.expect += len(pending)
			h.replacing(pending)
			h.mu.Unlock()
		}
		if !send(ev) {
			return
		}
		if stop {
			// The reflector stops the watch on an ERROR; it never reads further.
			close(w.ch)
			return
		}
	}
	if !a.ended {
		h.park() // open at the end of the trace: the reflector waits on it
		return
	}
	// The reflector's "very short watch" check counts events from when its watch loop took
	// the stream: the WATCH answer, or after a streaming list its initial-events-end
	// bookmark.
	since, after := a.t, len(a.frames)
	for i, f := range a.frames {
		if h.streaming && strings.Contains(string(f.raw), "k8s.io/initial-events-end") {
			since, after = f.t, len(a.frames)-i-1
		}
	}
	if after == 0 && a.endT-since >= 1 {
		// The trace's watch lasted 1 s or more with no frame: not a "very short watch".
		select {
		case <-time.After(1100 * time.Millisecond):
		case <-ctx.Done():
			return
		}
	}
	// A clean end, and a transport error, which StreamWatcher treats as a clean close for
	// the errors a reset connection gives (net.IsProbableEOF).
	close(w.ch)
}

// scripted is a watch.Interface whose channel only its player closes.
type scripted struct {
	ch   chan watch.Event
	stop chan struct{}
	once sync.Once
}

func (s *scripted) Stop()                          { s.once.Do(func() { close(s.stop) }) }
func (s *scripted) ResultChan() <-chan watch.Event { return s.ch }

func (h *harness) decodeFrame(raw []byte) (watch.Event, bool) {
	decodeErr := func(err error) (watch.Event, bool) {
		// StreamWatcher: "unable to decode an event from the watch stream", an InternalError
		// Status (its ClientErrorReporter, code 500).
		st := apierrors.NewInternalError(fmt.Errorf("unable to decode an event from the watch stream: %v", err)).ErrStatus
		return watch.Event{Type: watch.Error, Object: &st}, true
	}
	if first := bytes.TrimLeft(raw, " \t\r"); len(first) > 0 && first[0] != '{' {
		return h.decodeProtobufFrame(raw, decodeErr)
	}
	var env struct {
		Type   string          `json:"type"`
		Object json.RawMessage `json:"object"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		return decodeErr(err)
	}
	switch watch.EventType(env.Type) {
	case watch.Error:
		var st metav1.Status
		if err := json.Unmarshal(env.Object, &st); err != nil {
			return decodeErr(err)
		}
		return watch.Event{Type: watch.Error, Object: &st}, true
	case watch.Added, watch.Modified, watch.Deleted, watch.Bookmark:
		u, err := decodeObject(env.Object, h.kind, h.metadata)
		if err != nil {
			return decodeErr(err)
		}
		return watch.Event{Type: watch.EventType(env.Type), Object: u}, false
	default:
		return decodeErr(fmt.Errorf("got invalid watch event type: %v", env.Type))
	}
}

// decodeProtobufFrame reads a protobuf watch frame as client-go's streaming decoder does: a
// metav1.WatchEvent (no magic, no envelope) whose object is an enveloped protobuf object.
func (h *harness) decodeProtobufFrame(raw []byte, decodeErr func(error) (watch.Event, bool)) (watch.Event, bool) {
	var ev metav1.WatchEvent
	if err := ev.Unmarshal(raw); err != nil {
		return decodeErr(err)
	}
	obj, err := decodeProtobufFor(ev.Object.Raw, h.metadata)
	if err != nil {
		return decodeErr(err)
	}
	switch watch.EventType(ev.Type) {
	case watch.Error:
		st, ok := obj.(*metav1.Status)
		if !ok {
			return decodeErr(fmt.Errorf("an ERROR event carrying a %T", obj))
		}
		return watch.Event{Type: watch.Error, Object: st}, true
	case watch.Added, watch.Modified, watch.Deleted, watch.Bookmark:
		u, err := unstructuredOf(obj, h.kind)
		if err != nil {
			return decodeErr(err)
		}
		return watch.Event{Type: watch.EventType(ev.Type), Object: u}, false
	default:
		return decodeErr(fmt.Errorf("got invalid watch event type: %v", ev.Type))
	}
}

func keyOf(obj any) string {
	k, _ := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	return k
}

func (h *harness) note(n Notification, tombstone bool) {
	h.mu.Lock()
	n.After = len(h.requests)
	h.notes = append(h.notes, n)
	if tombstone {
		h.gone++
	} else {
		h.handled++
	}
	h.cond.Broadcast()
	h.mu.Unlock()
}

func meta(obj any) (rv string, labels map[string]string) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u.GetResourceVersion(), u.GetLabels()
	}
	return "", nil
}

// ownerOf is the object's controller owner (its ownerReferences entry with controller:
// true) as Kind/name, "" when it has none.
func ownerOf(obj any) string {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		if ref := metav1.GetControllerOfNoCopy(u); ref != nil {
			return ref.Kind + "/" + ref.Name
		}
	}
	return ""
}

// parentsOf is the parents a secondary's object maps to under parentsBy, as
// controller-runtime's handler.EnqueueRequestForOwner maps them: "owner:<type>" (with
// OnlyControllerOwner) the owner metav1.GetControllerOf names, "any-owner:<type>" every
// entry of ownerReferences, each kept when its kind is the type's (and, for a type written
// Kind.group, its apiVersion's group is the group, or the apiVersion is empty, as the core
// matches), and keyed namespace/name in the object's namespace; sorted, without repeats.
// "custom" (the user's own function) and the primary map to nothing here.
func parentsOf(parentsBy string, obj any) []string {
	u, ok := obj.(*unstructured.Unstructured)
	how, ownerType, _ := strings.Cut(parentsBy, ":")
	if !ok || ownerType == "" {
		return nil
	}
	kind, group, grouped := strings.Cut(ownerType, ".")
	var refs []metav1.OwnerReference
	switch how {
	case "owner":
		if ref := metav1.GetControllerOfNoCopy(u); ref != nil {
			refs = []metav1.OwnerReference{*ref}
		}
	case "any-owner":
		refs = u.GetOwnerReferences()
	default:
		return nil
	}
	var parents []string
	for _, ref := range refs {
		if ref.Kind != kind {
			continue
		}
		if grouped && ref.APIVersion != "" {
			gv, err := schema.ParseGroupVersion(ref.APIVersion)
			if err != nil || gv.Group != group {
				continue
			}
		}
		key := ref.Name
		if ns := u.GetNamespace(); ns != "" {
			key = ns + "/" + ref.Name
		}
		parents = append(parents, key)
	}
	sort.Strings(parents)
	return slices.Compact(parents)
}

// informer is one source's informer, running.
type informer struct {
	h     *harness
	store cache.Store
	ctrl  cache.Controller
	done  chan struct{}
}

// start runs client-go's informer over one source's answers until ctx is done.
func start(ctx context.Context, src *source) *informer {
	h := &harness{kind: src.kind, streaming: src.streaming, metadata: src.metadata, parentsBy: src.parentsBy, seen: map[*unstructured.Unstructured]bool{}, lists: src.lists, watches: src.watches, requests: []Request{}, notes: []Notification{}}
	h.cond = sync.NewCond(&h.mu)
	handler := cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			rv, labels := meta(obj)
			h.note(Notification{Kind: "add", Key: keyOf(obj), RV: rv, Labels: labels, Owner: ownerOf(obj), Parents: parentsOf(h.parentsBy, obj), InInitialList: initial}, false)
		},
		UpdateFunc: func(old, obj any) {
			rv, labels := meta(obj)
			orv, olabels := meta(old)
			h.note(Notification{Kind: "update", Key: keyOf(obj), RV: rv, OldRV: orv, Labels: labels, OldLabels: olabels, Owner: ownerOf(obj), OldOwner: ownerOf(old), Parents: parentsOf(h.parentsBy, obj), OldParents: parentsOf(h.parentsBy, old)}, false)
		},
		DeleteFunc: func(obj any) {
			n := Notification{Kind: "delete", Key: keyOf(obj)}
			tomb, isTomb := obj.(cache.DeletedFinalStateUnknown)
			if isTomb {
				obj = tomb.Obj
				n.Tombstone = true
			}
			n.RV, n.Labels = meta(obj)
			n.Owner = ownerOf(obj)
			n.Parents = parentsOf(h.parentsBy, obj)
			h.note(n, isTomb)
		},
	}
	objType := &unstructured.Unstructured{}
	objType.SetAPIVersion("v1")
	objType.SetKind(src.kind)
	store, ctrl := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: h,
		ObjectType:    objType,
		Handler:       handler,
		Transform:     h.transform,
	})
	h.store = store
	inf := &informer{h: h, store: store, ctrl: ctrl, done: make(chan struct{})}
	go func() {
		ctrl.RunWithContext(ctx)
		close(inf.done)
	}()
	return inf
}

// play runs client-go's informer on each source's answers (one informer a source, as a
// controller has one a kind, sharing nothing) until the trace is used up and every reflector
// is idle, and returns what each did. It does no I/O and reads time only through the time
// package, so run inside a synctest bubble (informer_test.go) every timer of the reflectors
// and of the harness is virtual; run by main it is real. It fails when the play has not
// settled within playBound of the clock it runs on.
func play(sources []*source, playBound time.Duration) (Output, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	informers := make([]*informer, len(sources))
	for i, src := range sources {
		informers[i] = start(ctx, src)
	}
	stop := func() {
		cancel()
		for _, inf := range informers {
			<-inf.done
		}
	}

	// Wait until, for each source, every answer is used (or the reflector waits for one the
	// trace lacks) and the reflector is idle with everything it queued handled. Sources do
	// not wait on each other, so one settled stays settled while the next is waited for.
	deadline := time.Now().Add(playBound)
	bound := time.AfterFunc(playBound, func() {
		for _, inf := range informers {
			inf.h.mu.Lock()
			inf.h.cond.Broadcast()
			inf.h.mu.Unlock()
		}
	})
	defer bound.Stop()
	for i, inf := range informers {
		h := inf.h
		h.mu.Lock()
		for !(h.parked && h.quiet()) && time.Now().Before(deadline) {
			h.cond.Wait()
		}
		settled := h.parked && h.quiet()
		why := fmt.Sprintf("source %d: the play did not settle within %v: queued %d, handled %d, expected %d, parked %v, requests %+v", i, playBound, h.queued, h.handled, h.expect, h.parked, h.requests)
		h.mu.Unlock()
		if !settled {
			for _, inf := range informers {
				inf.h.mu.Lock()
				inf.h.stopped = true
				inf.h.cond.Broadcast()
				inf.h.mu.Unlock()
			}
			stop()
			return Output{}, errors.New(why)
		}
	}
	outs := make([]SourceOutput, len(informers))
	for i, inf := range informers {
		h := inf.h
		h.mu.Lock()
		h.stopped = true
		outs[i] = SourceOutput{
			ParentsBy:       h.parentsBy,
			Requests:        h.requests,
			Notifications:   h.notes,
			Store:           map[string]StoreEntry{},
			LastSyncRV:      inf.ctrl.LastSyncResourceVersion(),
			UnplayedLists:   len(h.lists),
			UnplayedWatches: len(h.watches),
		}
		h.cond.Broadcast()
		h.mu.Unlock()
		keys := inf.store.ListKeys()
		sort.Strings(keys)
		for _, k := range keys {
			obj, _, _ := inf.store.GetByKey(k)
			rv, labels := meta(obj)
			outs[i].Store[k] = StoreEntry{RV: rv, Labels: labels, Owner: ownerOf(obj), Parents: parentsOf(h.parentsBy, obj)}
		}
	}
	stop()
	return Output{
		Informer:     "client-go v0.36.3 NewInformerWithOptions, RealFIFO (AtomicFIFO, UnlockWhileProcessingFIFO)",
		SourceOutput: outs[0],
		Secondaries:  outs[1:],
	}, nil
}

// load reads the trace named on the command line, exiting 2 on a bad trace and 3 on one
// this harness cannot play.
func load(args []string) []*source {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: informer TRACE.jsonl")
		os.Exit(2)
	}
	sources, err := readTrace(args[1])
	var cp cannotPlay
	if errors.As(err, &cp) {
		fmt.Fprintln(os.Stderr, "cannot play:", cp.why)
		os.Exit(3)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	return sources
}

// write prints what the play did, or why it failed (exit 1).
func write(to *os.File, out Output, err error) int {
	if err != nil {
		fmt.Fprintln(os.Stderr, "informer:", err)
		return 1
	}
	enc := json.NewEncoder(to)
	enc.SetIndent("", " ")
	if err := enc.Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// main plays on the real clock (`go run . TRACE.jsonl`, to watch a play as it happens):
// the reflector's backoffs are waited out. The harness the tests run is the test binary
// (informer_test.go, built by build.sh), which plays on virtual time.
func main() {
	klog.SetOutput(os.Stderr)
	klog.LogToStderr(false)
	out, err := play(load(os.Args), realPlayBound)
	os.Exit(write(os.Stdout, out, err))
}
