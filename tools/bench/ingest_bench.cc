// Ingest benchmarks: how fast kinformer turns watch-stream bytes into cached typed objects, next
// to the floor the design compares against (a bare RapidJSON parse of the same bytes), and how many
// bytes one cached Pod costs.
//
// The streams are generated in memory: realistic objects as a kube-apiserver sends them (labels,
// annotations, managedFields, ownerReferences, two containers, status conditions), one
// {"type":"MODIFIED","object":...} line each, fed to the decoder in 16 KiB pieces as HTTP chunks
// would be.

#include <benchmark/benchmark.h>
#include <rapidjson/document.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bench_util.h"
#include "kinformer/cache/store.h"
#include "kinformer/client/dynamic_object.h"
#include "kinformer/client/endpoint_slice.h"
#include "kinformer/client/pod.h"
#include "kinformer/client/watch_decoder.h"

namespace {

using kinformer::bench::heap_in_use;
using kinformer::client::ObjectPtr;
using kinformer::client::WatchDecoder;
using kinformer::client::WatchEvent;

constexpr std::size_t kEvents = 20'000;
constexpr std::size_t kDistinctPods = 5'000;  // each modified 4 times over the stream
constexpr std::size_t kChunk = 16 * 1024;
constexpr std::size_t kMemoryPods = 10'000;

std::string hex(std::uint64_t v, int digits) {
  static const char* d = "0123456789abcdef";
  std::string s(static_cast<std::size_t>(digits), '0');
  for (int i = digits - 1; i >= 0; --i, v >>= 4) s[static_cast<std::size_t>(i)] = d[v & 15];
  return s;
}

std::string uid(std::uint64_t seed) {
  std::uint64_t a = seed * 0x9e3779b97f4a7c15ULL;
  std::uint64_t b = (seed + 7) * 0xc2b2ae3d27d4eb4fULL;
  return hex(a >> 32, 8) + "-" + hex(a >> 16, 4) + "-4" + hex(a, 3) + "-a" + hex(b >> 48, 3) + "-" +
         hex(b, 12);
}

std::string ip(std::size_t i) {
  return "10.244." + std::to_string((i / 250) % 250) + "." + std::to_string(i % 250 + 2);
}

// A Pod of a Deployment with an Istio sidecar, as served by the API server (~3.4 KB).
std::string pod_json(std::size_t i, std::uint64_t rv) {
  const std::string app = "svc-" + std::to_string(i % 97);
  const std::string rs = app + "-7d4b9c" + hex(i % 4096, 3);
  const std::string name = rs + "-" + hex(i * 2654435761ULL, 5);
  const std::string node = "node-" + std::to_string(i % 50);
  const std::string ts = "2024-05-02T09:" + std::to_string(10 + i % 50) + ":07Z";
  std::string s;
  s.reserve(4096);
  s +=
      R"({"kind":"Pod","apiVersion":"v1","metadata":{"name":")" + name + R"(","generateName":")" +
      rs + R"(-","namespace":"team-)" + std::to_string(i % 20) + R"(","uid":")" + uid(i) +
      R"(","resourceVersion":")" + std::to_string(rv) + R"(","creationTimestamp":")" + ts +
      R"(","labels":{"app":")" + app + R"(","pod-template-hash":"7d4b9c)" + hex(i % 4096, 3) +
      R"(","security.istio.io/tlsMode":"istio","service.istio.io/canonical-name":")" + app +
      R"(","service.istio.io/canonical-revision":"v1","version":"v1"},"annotations":{"kubectl.kubernetes.io/default-container":"app","prometheus.io/port":"15020","prometheus.io/scrape":"true","sidecar.istio.io/status":"{\"initContainers\":[\"istio-init\"],\"containers\":[\"istio-proxy\"],\"revision\":\"default\"}"},"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":")" +
      rs + R"(","uid":")" + uid(i + 1'000'000) +
      R"(","controller":true,"blockOwnerDeletion":true}],"managedFields":[{"manager":"kube-controller-manager","operation":"Update","apiVersion":"v1","time":")" +
      ts +
      R"(","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:annotations":{".":{},"f:kubectl.kubernetes.io/default-container":{},"f:prometheus.io/path":{},"f:prometheus.io/port":{}},"f:generateName":{},"f:labels":{".":{},"f:app":{},"f:pod-template-hash":{},"f:version":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:image":{},"f:imagePullPolicy":{},"f:name":{},"f:ports":{}}},"f:dnsPolicy":{},"f:restartPolicy":{},"f:serviceAccountName":{}}}},{"manager":"kubelet","operation":"Update","apiVersion":"v1","time":")" +
      ts +
      R"(","fieldsType":"FieldsV1","fieldsV1":{"f:status":{"f:conditions":{"k:{\"type\":\"ContainersReady\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}}},"f:phase":{},"f:podIP":{},"f:startTime":{}}},"subresource":"status"}]},)";
  s +=
      R"("spec":{"containers":[{"name":"app","image":"registry.example.com/)" + app + R"(:1.4.)" +
      std::to_string(i % 9) +
      R"(","ports":[{"name":"http","containerPort":8080,"protocol":"TCP"}],"resources":{"limits":{"cpu":"500m","memory":"256Mi"},"requests":{"cpu":"100m","memory":"128Mi"}},"imagePullPolicy":"IfNotPresent"},{"name":"istio-proxy","image":"docker.io/istio/proxyv2:1.22.0","ports":[{"name":"http-envoy-prom","containerPort":15090,"protocol":"TCP"}],"imagePullPolicy":"IfNotPresent"}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","serviceAccountName":")" +
      app + R"(","serviceAccount":")" + app + R"(","nodeName":")" + node +
      R"(","securityContext":{},"schedulerName":"default-scheduler","priority":0,"enableServiceLinks":true},)";
  s +=
      R"("status":{"phase":"Running","conditions":[{"type":"Initialized","status":"True","lastProbeTime":null,"lastTransitionTime":")" +
      ts + R"("},{"type":"Ready","status":")" + (rv % 2 ? "True" : "False") +
      R"(","lastProbeTime":null,"lastTransitionTime":")" + ts +
      R"("},{"type":"ContainersReady","status":"True","lastProbeTime":null,"lastTransitionTime":")" +
      ts +
      R"("},{"type":"PodScheduled","status":"True","lastProbeTime":null,"lastTransitionTime":")" +
      ts + R"("}],"hostIP":"172.18.0.)" + std::to_string(i % 50 + 2) + R"(","podIP":")" + ip(i) +
      R"(","podIPs":[{"ip":")" + ip(i) + R"("}],"startTime":")" + ts +
      R"(","containerStatuses":[{"name":"app","state":{"running":{"startedAt":")" + ts +
      R"("}},"ready":true,"restartCount":0,"image":"registry.example.com/app:1.4","imageID":"registry.example.com/app@sha256:)" +
      hex(i, 16) + R"(","containerID":"containerd://)" + hex(i * 31, 16) +
      R"(","started":true}],"qosClass":"Burstable"}})";
  return s;
}

// An EndpointSlice of a Service with 8 Pod endpoints (~3 KB).
std::string slice_json(std::size_t i, std::uint64_t rv) {
  const std::string svc = "svc-" + std::to_string(i % 97);
  const std::string ns = "team-" + std::to_string(i % 20);
  std::string s;
  s.reserve(4096);
  s +=
      R"({"kind":"EndpointSlice","apiVersion":"discovery.k8s.io/v1","metadata":{"name":")" + svc +
      "-" + hex(i * 2654435761ULL, 5) + R"(","generateName":")" + svc + R"(-","namespace":")" + ns +
      R"(","uid":")" + uid(i) + R"(","resourceVersion":")" + std::to_string(rv) +
      R"(","generation":3,"creationTimestamp":"2024-05-02T09:14:07Z","labels":{"endpointslice.kubernetes.io/managed-by":"endpointslice-controller.k8s.io","kubernetes.io/service-name":")" +
      svc +
      R"("},"annotations":{"endpoints.kubernetes.io/last-change-trigger-time":"2024-05-02T09:14:19Z"},"ownerReferences":[{"apiVersion":"v1","kind":"Service","name":")" +
      svc + R"(","uid":")" + uid(i + 1'000'000) +
      R"(","controller":true,"blockOwnerDeletion":true}],"managedFields":[{"manager":"kube-controller-manager","operation":"Update","apiVersion":"discovery.k8s.io/v1","time":"2024-05-02T09:14:19Z","fieldsType":"FieldsV1","fieldsV1":{"f:addressType":{},"f:endpoints":{},"f:metadata":{"f:annotations":{".":{},"f:endpoints.kubernetes.io/last-change-trigger-time":{}},"f:generateName":{},"f:labels":{".":{},"f:endpointslice.kubernetes.io/managed-by":{},"f:kubernetes.io/service-name":{}},"f:ownerReferences":{}},"f:ports":{}}}]},"addressType":"IPv4","endpoints":[)";
  for (std::size_t e = 0; e < 8; ++e) {
    if (e) s += ',';
    const std::size_t p = i * 8 + e;
    s += R"({"addresses":[")" + ip(p) + R"("],"conditions":{"ready":)" +
         (e % 5 ? "true" : "false") + R"(,"serving":true,"terminating":false},"nodeName":"node-)" +
         std::to_string(p % 50) + R"(","zone":"zone-)" + std::to_string(p % 3) +
         R"(","targetRef":{"kind":"Pod","namespace":")" + ns + R"(","name":")" + svc + "-7d4b9c-" +
         hex(p, 5) + R"(","uid":")" + uid(p) + R"("}})";
  }
  s +=
      R"(],"ports":[{"name":"http","protocol":"TCP","port":8080,"appProtocol":"http"},{"name":"grpc","protocol":"TCP","port":9090}]})";
  return s;
}

struct Stream {
  std::string bytes;
  std::vector<std::string_view> lines;  // each without its newline
};

template <typename Make>
Stream make_stream(std::size_t events, std::size_t distinct, Make make) {
  Stream st;
  st.bytes.reserve(events * 3600);
  std::vector<std::size_t> starts;
  for (std::size_t n = 0; n < events; ++n) {
    starts.push_back(st.bytes.size());
    st.bytes += R"({"type":"MODIFIED","object":)";
    st.bytes += make(n % distinct, 1'000'000 + n);
    st.bytes += "}\n";
  }
  starts.push_back(st.bytes.size());
  for (std::size_t n = 0; n < events; ++n) {
    st.lines.emplace_back(st.bytes.data() + starts[n], starts[n + 1] - starts[n] - 1);
  }
  return st;
}

const Stream& pod_stream() {
  static const Stream s = make_stream(kEvents, kDistinctPods, pod_json);
  return s;
}

const Stream& slice_stream() {
  static const Stream s = make_stream(kEvents, kDistinctPods, slice_json);
  return s;
}

void set_rates(benchmark::State& state, const Stream& s) {
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * s.lines.size()));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * s.bytes.size()));
  state.counters["event_bytes"] =
      static_cast<double>(s.bytes.size()) / static_cast<double>(s.lines.size());
}

// The floor: RapidJSON's DOM parse of each line (a fresh Document per event, default allocators).
void BM_BareRapidJsonParse(benchmark::State& state) {
  const Stream& s = pod_stream();
  for (auto _ : state) {
    for (std::string_view line : s.lines) {
      rapidjson::Document doc;
      doc.Parse(line.data(), line.size());
      benchmark::DoNotOptimize(doc.HasParseError());
    }
  }
  set_rates(state, s);
}
BENCHMARK(BM_BareRapidJsonParse)->Unit(benchmark::kMillisecond);

// A stricter floor: the fastest RapidJSON parse (in situ into a copy of the line, reused arena),
// i.e. the parse WatchDecoder itself does, without building any model.
void BM_BareRapidJsonParseInsitu(benchmark::State& state) {
  const Stream& s = pod_stream();
  std::string buf;
  buf.reserve(64 * 1024);
  static char arena[64 * 1024];
  rapidjson::MemoryPoolAllocator<> pool(arena, sizeof arena);
  for (auto _ : state) {
    for (std::string_view line : s.lines) {
      buf.assign(line);
      pool.Clear();
      rapidjson::Document doc(&pool);
      doc.ParseInsitu(buf.data());
      benchmark::DoNotOptimize(doc.HasParseError());
    }
  }
  set_rates(state, s);
}
BENCHMARK(BM_BareRapidJsonParseInsitu)->Unit(benchmark::kMillisecond);

// Feeds the stream in 16 KiB pieces; decoded events are dropped after each piece (as a store
// replacing the previous revision would drop them).
void run_decoder(benchmark::State& state, const Stream& s,
                 std::shared_ptr<const kinformer::client::Codec> codec) {
  std::vector<WatchEvent> out;
  out.reserve(64);
  for (auto _ : state) {
    WatchDecoder decoder(codec);
    std::string_view rest = s.bytes;
    while (!rest.empty()) {
      std::string_view piece = rest.substr(0, kChunk);
      rest.remove_prefix(piece.size());
      if (auto st = decoder.feed(piece, out); !st) {
        state.SkipWithError(st.error().to_string().c_str());
        return;
      }
      out.clear();
    }
    if (decoder.events() != s.lines.size()) state.SkipWithError("event count mismatch");
  }
  set_rates(state, s);
}

void BM_WatchDecoderPods(benchmark::State& state) {
  run_decoder(state, pod_stream(),
              kinformer::client::ResourceTraits<kinformer::client::Pod>::type().codec);
}
BENCHMARK(BM_WatchDecoderPods)->Unit(benchmark::kMillisecond);

void BM_WatchDecoderEndpointSlices(benchmark::State& state) {
  run_decoder(state, slice_stream(),
              kinformer::client::ResourceTraits<kinformer::client::EndpointSlice>::type().codec);
}
BENCHMARK(BM_WatchDecoderEndpointSlices)->Unit(benchmark::kMillisecond);

void BM_WatchDecoderDynamic(benchmark::State& state) {
  run_decoder(state, pod_stream(), kinformer::client::dynamic_codec());
}
BENCHMARK(BM_WatchDecoderDynamic)->Unit(benchmark::kMillisecond);

std::vector<ObjectPtr> decode_all(const Stream& s) {
  WatchDecoder decoder(kinformer::client::ResourceTraits<kinformer::client::Pod>::type().codec);
  std::vector<WatchEvent> events;
  events.reserve(s.lines.size());
  (void)decoder.feed(s.bytes, events);
  std::vector<ObjectPtr> objects;
  objects.reserve(events.size());
  for (auto& e : events) objects.push_back(std::move(e.object));
  return objects;
}

// Store::upsert of already decoded Pods (5,000 keys, each updated 4 times per pass).
void BM_StoreUpsertPods(benchmark::State& state) {
  const Stream& s = pod_stream();
  static const std::vector<ObjectPtr> pods = decode_all(s);
  kinformer::cache::Store store;
  for (auto _ : state) {
    for (const auto& p : pods) benchmark::DoNotOptimize(store.upsert(p));
  }
  set_rates(state, s);
}
BENCHMARK(BM_StoreUpsertPods)->Unit(benchmark::kMillisecond);

// Decode + store: the ingest path up to handler dispatch.
void BM_IngestPods(benchmark::State& state) {
  const Stream& s = pod_stream();
  const auto codec = kinformer::client::ResourceTraits<kinformer::client::Pod>::type().codec;
  kinformer::cache::Store store;
  std::vector<WatchEvent> out;
  out.reserve(64);
  for (auto _ : state) {
    WatchDecoder decoder(codec);
    std::string_view rest = s.bytes;
    while (!rest.empty()) {
      std::string_view piece = rest.substr(0, kChunk);
      rest.remove_prefix(piece.size());
      if (auto st = decoder.feed(piece, out); !st) {
        state.SkipWithError(st.error().to_string().c_str());
        return;
      }
      for (auto& e : out) benchmark::DoNotOptimize(store.upsert(std::move(e.object)));
      out.clear();
    }
  }
  set_rates(state, s);
}
BENCHMARK(BM_IngestPods)->Unit(benchmark::kMillisecond);

// Bytes of heap per cached Pod: 10,000 distinct Pods decoded and held (as a cache holds them).
// The decoder, its buffers and the vectors holding the results are allocated before the first
// measurement, so the counter is the Pods alone (object, control block, strings, vectors).
void BM_MemoryPerPod(benchmark::State& state) {
  const Stream s = make_stream(kMemoryPods, kMemoryPods, pod_json);
  const auto codec = kinformer::client::ResourceTraits<kinformer::client::Pod>::type().codec;
  double per_pod = 0;
  for (auto _ : state) {
    WatchDecoder decoder(codec);
    std::vector<WatchEvent> events;
    events.reserve(s.lines.size() + 1);
    // Warm the decoder's line buffer with the first (largest-ish) event, then drop it.
    std::size_t first = s.lines[0].size() + 1;
    (void)decoder.feed(std::string_view(s.bytes).substr(0, first), events);
    events.clear();
    std::string_view rest = std::string_view(s.bytes).substr(first);
    const std::size_t before = heap_in_use();
    (void)decoder.feed(rest, events);
    const std::size_t after = heap_in_use();
    if (events.size() != s.lines.size() - 1) state.SkipWithError("event count mismatch");
    per_pod = static_cast<double>(after - before) / static_cast<double>(events.size());
    benchmark::DoNotOptimize(events.data());
  }
  state.counters["bytes_per_pod"] = per_pod;
  state.counters["json_bytes_per_pod"] =
      static_cast<double>(s.bytes.size()) / static_cast<double>(s.lines.size());
  state.counters["sizeof_Pod"] = sizeof(kinformer::client::Pod);
}
BENCHMARK(BM_MemoryPerPod)->Iterations(1)->Unit(benchmark::kMillisecond);

// The same 10,000 distinct Pods, held in a cache::Store (its key map and namespace index included)
// instead of a vector: what a cached Pod costs in an informer, the counterpart of client-go's
// Indexer with a namespace index. The decoded events are dropped after each upsert.
void BM_MemoryPerPodInStore(benchmark::State& state) {
  const Stream s = make_stream(kMemoryPods, kMemoryPods, pod_json);
  const auto codec = kinformer::client::ResourceTraits<kinformer::client::Pod>::type().codec;
  double per_pod = 0;
  for (auto _ : state) {
    WatchDecoder decoder(codec);
    kinformer::cache::Store store;
    std::vector<WatchEvent> events;
    events.reserve(64);
    std::size_t first = s.lines[0].size() + 1;
    (void)decoder.feed(std::string_view(s.bytes).substr(0, first), events);
    for (auto& e : events) (void)store.upsert(std::move(e.object));
    events.clear();
    std::string_view rest = std::string_view(s.bytes).substr(first);
    const std::size_t before = heap_in_use();
    while (!rest.empty()) {
      std::string_view piece = rest.substr(0, kChunk);
      rest.remove_prefix(piece.size());
      (void)decoder.feed(piece, events);
      for (auto& e : events) (void)store.upsert(std::move(e.object));
      events.clear();
    }
    const std::size_t after = heap_in_use();
    if (store.size() != s.lines.size()) state.SkipWithError("store size mismatch");
    per_pod = static_cast<double>(after - before) / static_cast<double>(s.lines.size() - 1);
    benchmark::DoNotOptimize(&store);
  }
  state.counters["bytes_per_pod"] = per_pod;
}
BENCHMARK(BM_MemoryPerPodInStore)->Iterations(1)->Unit(benchmark::kMillisecond);

bool write_file(const char* path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) {
    std::fprintf(stderr, "kinformer_bench: cannot write %s\n", path);
    return false;
  }
  return true;
}

// --write-stream=PATH: the Pod stream the decode and ingest benchmarks use (20,000 MODIFIED
// events, 5,000 distinct Pods), one event per line. --write-memory-stream=PATH: the 10,000
// distinct Pods of the memory benchmarks. With either flag the program writes and exits, so that a
// peer (tools/bench/cmd/clientgo_bench) can decode the very same bytes.
// Returns -1 when neither flag is present, else the exit code.
int write_streams(int argc, char** argv) {
  bool any = false;
  bool ok = true;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    constexpr std::string_view kStream = "--write-stream=";
    constexpr std::string_view kMemory = "--write-memory-stream=";
    if (arg.starts_with(kStream)) {
      any = true;
      ok = write_file(argv[i] + kStream.size(), pod_stream().bytes) && ok;
    } else if (arg.starts_with(kMemory)) {
      any = true;
      ok = write_file(argv[i] + kMemory.size(),
                      make_stream(kMemoryPods, kMemoryPods, pod_json).bytes) &&
           ok;
    }
  }
  if (!any) return -1;
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (const int rc = write_streams(argc, argv); rc >= 0) return rc;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
