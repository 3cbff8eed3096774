// Command peer is the client-go side of the reconcile-loop benchmarks (bench/run.sh).
//
// It is what a Go user would write: a shared informer factory scoped to one namespace and
// label selector, a pod informer with an index by the `cell` label, and a rate-limited
// workqueue of cell keys drained by one worker (controller-runtime's default
// MaxConcurrentReconciles). Every setting is client-go's default (no resync, default
// rate limiter, default QPS, the WatchListClient feature as shipped).
//
// Wire format (-wire): client-go 0.36's typed Pod and ReplicaSet clients already ask for
// protobuf when the config names no content type (gentype's PrefersProtobuf:
// "application/vnd.kubernetes.protobuf,application/json"); -wire protobuf sets exactly
// that explicitly, -wire json sets ContentType application/json, which turns it off. The
// replay server speaks JSON only, so there client-go decodes JSON either way. The report's
// "wire" is what the LIST/WATCH responses' Content-Type actually was.
//
// It prints one JSON line: sync time, the wall time the sentinel pod's final state was
// reconciled, peak RSS, CPU seconds and the heap growth over the sync.
//
// With -scenario owned (issue 13) it is a ReplicaSet controller instead, written the way
// controller-runtime's For(&ReplicaSet{}).Owns(&Pod{}) works: a ReplicaSet informer and a
// pod informer from one factory, ReplicaSet events enqueueing the ReplicaSet's key, pod
// events its controller owner's (EnqueueRequestForOwner with OnlyControllerOwner), and the
// worker reading the ReplicaSet from its informer and its pods from an index on the owner.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
)

type report struct {
	Peer        string  `json:"peer"`
	Pods        int     `json:"pods"`
	Children    int     `json:"children"`
	FinalObj    int     `json:"final_objects"`
	FinalChild  int     `json:"final_children"`
	SyncSeconds float64 `json:"sync_seconds"`
	DoneUnixNs  int64   `json:"done_unix_ns"`
	Reconciles  int64   `json:"reconciles"`
	HeapBytes   int64   `json:"heap_bytes"`
	RssPeakKB   int64   `json:"rss_peak_kb"`
	CPUSeconds  float64 `json:"cpu_seconds"`
	CPUAtSync   float64 `json:"cpu_at_sync"`
	CPUSys      float64 `json:"cpu_system"`
	CPUSysSync  float64 `json:"cpu_system_at_sync"`
	Wire        string  `json:"wire"`
	Error       string  `json:"error,omitempty"`
}

func fail(r *report, err string) {
	r.Error = err
	out, _ := json.Marshal(r)
	fmt.Println(string(out))
	os.Exit(1)
}

func main() {
	server := flag.String("server", "", "replay server URL (http://127.0.0.1:port)")
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of a real apiserver")
	namespace := flag.String("namespace", "bench", "namespace")
	selector := flag.String("selector", "cell", "label selector")
	mode := flag.String("mode", "sync", "sync | throughput")
	scenario := flag.String("scenario", "pods", "pods | owned (ReplicaSets owning pods)")
	deadline := flag.Duration("deadline", 300*time.Second, "give up after this long")
	wire := flag.String("wire", "protobuf", "protobuf | json: the content type to ask for")
	flag.Parse()
	r := &report{Peer: "client-go"}
	var reconciles atomic.Int64

	var cfg *rest.Config
	var err error
	if *kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", *kubeconfig)
		if err != nil {
			fail(r, err.Error())
		}
	} else {
		cfg = &rest.Config{Host: *server}
	}
	switch *wire {
	case "protobuf":
		cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
		cfg.ContentType = "application/vnd.kubernetes.protobuf"
	case "json":
		cfg.AcceptContentTypes = "application/json"
		cfg.ContentType = "application/json"
	default:
		fail(r, "-wire is protobuf or json")
	}
	globalWire = &wireSeen{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &recordWire{next: rt, seen: globalWire} })
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fail(r, err.Error())
	}

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)

	if *scenario == "owned" {
		runOwned(r, cs, &before, *namespace, *selector, *mode == "throughput", *deadline)
		return
	}

	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0,
		informers.WithNamespace(*namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = *selector }))
	pods := factory.Core().V1().Pods()
	informer := pods.Informer()
	if err := informer.AddIndexers(cache.Indexers{"cell": func(obj any) ([]string, error) {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return nil, nil
		}
		return []string{pod.Labels["cell"]}, nil
	}}); err != nil {
		fail(r, err.Error())
	}
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	enqueue := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if pod, ok := obj.(*corev1.Pod); ok {
			queue.Add(pod.Labels["cell"])
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	}); err != nil {
		fail(r, err.Error())
	}

	stop := make(chan struct{})
	start := time.Now()
	factory.Start(stop)
	// cache.WaitForCacheSync polls every 100 ms; poll every millisecond for a fair clock.
	for !informer.HasSynced() {
		if time.Since(start) > *deadline {
			fail(r, "not synced before the deadline")
		}
		time.Sleep(time.Millisecond)
	}
	r.SyncSeconds = time.Since(start).Seconds()
	_, r.CPUAtSync = procStats()
	r.CPUSysSync = systemCPU()

	done := make(chan struct{})
	indexer := informer.GetIndexer()
	go func() {
		for {
			key, quit := queue.Get()
			if quit {
				return
			}
			reconciles.Add(1)
			members, _ := indexer.ByIndex("cell", key)
			if key == "sentinel" {
				for _, m := range members {
					if pod, ok := m.(*corev1.Pod); ok && pod.Annotations["bench/phase"] == "end" {
						r.DoneUnixNs = time.Now().UnixNano()
						close(done)
						return
					}
				}
			}
			queue.Forget(key)
			queue.Done(key)
		}
	}()

	if *mode == "throughput" {
		select {
		case <-done:
		case <-time.After(*deadline - time.Since(start)):
			fail(r, "the sentinel's final state never reached a reconcile")
		}
	} else {
		// Heap growth over the sync, after a second to settle (as the Rust peers do);
		// only here, so no forced GC lands inside a throughput measurement.
		time.Sleep(time.Second)
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		r.HeapBytes = int64(after.HeapAlloc) - int64(before.HeapAlloc)
	}
	r.Pods = len(informer.GetStore().ListKeys())
	r.Reconciles = reconciles.Load()
	r.RssPeakKB, r.CPUSeconds = procStats()
	r.CPUSys = systemCPU()
	r.Wire = wireOf()
	out, _ := json.Marshal(r)
	fmt.Println(string(out))
	os.Exit(0)
}

// runOwned is the two-source peer: ReplicaSets owning pods, reconciled by ReplicaSet.
func runOwned(r *report, cs *kubernetes.Clientset, before *runtime.MemStats, namespace, selector string, throughput bool, deadline time.Duration) {
	var reconciles atomic.Int64
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0,
		informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	replicaSets := factory.Apps().V1().ReplicaSets().Informer()
	pods := factory.Core().V1().Pods().Informer()
	ownerOf := func(pod *corev1.Pod) (string, bool) {
		ref := metav1.GetControllerOf(pod)
		if ref == nil || ref.Kind != "ReplicaSet" {
			return "", false
		}
		return pod.Namespace + "/" + ref.Name, true
	}
	if err := pods.AddIndexers(cache.Indexers{"owner": func(obj any) ([]string, error) {
		if pod, ok := obj.(*corev1.Pod); ok {
			if key, ok := ownerOf(pod); ok {
				return []string{key}, nil
			}
		}
		return nil, nil
	}}); err != nil {
		fail(r, err.Error())
	}
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	unwrap := func(obj any) any {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			return tomb.Obj
		}
		return obj
	}
	enqueueReplicaSet := func(obj any) {
		if rs, ok := unwrap(obj).(*appsv1.ReplicaSet); ok {
			queue.Add(rs.Namespace + "/" + rs.Name)
		}
	}
	enqueueOwner := func(obj any) {
		if pod, ok := unwrap(obj).(*corev1.Pod); ok {
			if key, ok := ownerOf(pod); ok {
				queue.Add(key)
			}
		}
	}
	if _, err := replicaSets.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueueReplicaSet,
		UpdateFunc: func(_, obj any) { enqueueReplicaSet(obj) },
		DeleteFunc: enqueueReplicaSet,
	}); err != nil {
		fail(r, err.Error())
	}
	if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueueOwner,
		UpdateFunc: func(_, obj any) { enqueueOwner(obj) },
		DeleteFunc: enqueueOwner,
	}); err != nil {
		fail(r, err.Error())
	}

	stop := make(chan struct{})
	start := time.Now()
	factory.Start(stop)
	// Every source synced, as controller-runtime waits for before starting workers.
	for !replicaSets.HasSynced() || !pods.HasSynced() {
		if time.Since(start) > deadline {
			fail(r, "not synced before the deadline")
		}
		time.Sleep(time.Millisecond)
	}
	r.SyncSeconds = time.Since(start).Seconds()
	_, r.CPUAtSync = procStats()
	r.CPUSysSync = systemCPU()

	done := make(chan struct{})
	rsStore := replicaSets.GetIndexer()
	podIndex := pods.GetIndexer()
	sentinel := namespace + "/sentinel"
	isFinal := func(meta metav1.Object) bool {
		return meta.GetName() == "sentinel" && meta.GetAnnotations()["bench/phase"] == "end"
	}
	go func() {
		for {
			key, quit := queue.Get()
			if quit {
				return
			}
			reconciles.Add(1)
			obj, exists, _ := rsStore.GetByKey(key)
			children, _ := podIndex.ByIndex("owner", key)
			if key == sentinel && exists {
				if rs, ok := obj.(*appsv1.ReplicaSet); ok && isFinal(rs) {
					for _, child := range children {
						if pod, ok := child.(*corev1.Pod); ok && isFinal(pod) {
							r.DoneUnixNs = time.Now().UnixNano()
							close(done)
							return
						}
					}
				}
			}
			queue.Forget(key)
			queue.Done(key)
		}
	}()

	if throughput {
		select {
		case <-done:
		case <-time.After(deadline - time.Since(start)):
			fail(r, "the sentinel's final state never reached a reconcile")
		}
		// The informers' stores are written before their handlers run, and both sentinels'
		// last frames came last: the stores hold the final state.
		r.FinalObj = len(rsStore.ListKeys())
		r.FinalChild = len(podIndex.ListKeys())
	} else {
		time.Sleep(time.Second)
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		r.HeapBytes = int64(after.HeapAlloc) - int64(before.HeapAlloc)
		r.Pods = len(rsStore.ListKeys())
		r.Children = len(podIndex.ListKeys())
	}
	r.Reconciles = reconciles.Load()
	r.RssPeakKB, r.CPUSeconds = procStats()
	r.CPUSys = systemCPU()
	r.Wire = wireOf()
	out, _ := json.Marshal(r)
	fmt.Println(string(out))
	os.Exit(0)
}

// wireSeen is the media type of the last LIST or WATCH response.
type wireSeen struct {
	mu   sync.Mutex
	last string
}

func (w *wireSeen) set(contentType string) {
	name := "json"
	if strings.HasPrefix(contentType, "application/vnd.kubernetes.protobuf") {
		name = "protobuf"
	} else if !strings.HasPrefix(contentType, "application/json") {
		name = contentType
	}
	w.mu.Lock()
	w.last = name
	w.mu.Unlock()
}

func (w *wireSeen) get() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}

// recordWire notes each successful GET's response Content-Type (LISTs and WATCHes: the
// peer sends no other GET).
type recordWire struct {
	next http.RoundTripper
	seen *wireSeen
}

func (t *recordWire) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err == nil && req.Method == http.MethodGet && resp.StatusCode == http.StatusOK {
		t.seen.set(resp.Header.Get("Content-Type"))
	}
	return resp, err
}

var globalWire *wireSeen

// wireOf is the wire format the peer's responses came in.
func wireOf() string {
	if globalWire == nil {
		return ""
	}
	return globalWire.get()
}

// systemCPU is the system (kernel) part of the process's CPU seconds.
func systemCPU() float64 {
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0
	}
	s := string(stat)
	i := strings.LastIndex(s, ")")
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) <= 12 {
		return 0
	}
	k, _ := strconv.ParseFloat(f[12], 64)
	return k / 100
}

// procStats reads the peak RSS (VmHWM, KiB) and user+system CPU seconds from /proc, as the
// Rust peers do.
func procStats() (int64, float64) {
	var rss int64
	if status, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(status), "\n") {
			if strings.HasPrefix(line, "VmHWM:") {
				f := strings.Fields(line)
				if len(f) >= 2 {
					rss, _ = strconv.ParseInt(f[1], 10, 64)
				}
			}
		}
	}
	var cpu float64
	if stat, err := os.ReadFile("/proc/self/stat"); err == nil {
		s := string(stat)
		if i := strings.LastIndex(s, ")"); i >= 0 {
			f := strings.Fields(s[i+1:])
			if len(f) > 12 {
				u, _ := strconv.ParseFloat(f[11], 64)
				k, _ := strconv.ParseFloat(f[12], 64)
				cpu = (u + k) / 100
			}
		}
	}
	return rss, cpu
}
