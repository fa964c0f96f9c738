// kinformer_sync_bench: time to sync, memory and bytes of Pod, Secret and EndpointSlice informers
// on a real API server. Built on kinformer's public API only. Its client-go peer,
// tools/bench/cmd/clientgo-sync, measures the same things the same way; tools/bench/sync.sh runs
// both, interleaved, and prints the table (see docs/BENCHMARKS.md, "Sync side by side").
//
// One run of this program:
//   1. builds a RestClient (RestClientOptions::protobuf from --encoding and
//      RestClientOptions::gzip from --gzip, each set explicitly either way) and an InformerFactory
//      with typed Pod, Secret and EndpointSlice informers (all namespaces unless --namespace;
//      FactoryOptions::use_watch_list and InformerOptions::use_watch_list from --list-mode), one
//      counting handler per informer;
//   2. reads the baseline: VmRSS after malloc_trim(0), /proc/self/io rchar;
//   3. starts the factory and waits until every informer has_synced() and its handler has
//      counted the expected adds (--pods, --secrets, --slices: the cluster's totals);
//   4. reads the peak (VmHWM), the bytes received (rchar delta, and TCP_INFO
//      tcpi_bytes_received summed over the process's open TCP sockets, as the Go peer does),
//      waits --settle-ms/2, calls malloc_trim(0) (the Go peer: runtime.GC() and
//      debug.FreeOSMemory()), waits --settle-ms/2 and reads the steady VmRSS;
//   5. prints one JSON object on stdout.
//
// No transform: kinformer's decoders never keep metadata.managedFields (the client-go peer
// strips them in its transform), and the public API offers no other stripping transform.

#include <malloc.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <prometheus/registry.h>

#include "bench_util.h"
#include "kinformer/client/cluster_config.h"
#include "kinformer/client/endpoint_slice.h"
#include "kinformer/client/pod.h"
#include "kinformer/client/rest_client.h"
#include "kinformer/client/secret.h"
#include "kinformer/informer/informer_factory.h"
#include "kinformer/prometheus/prometheus_registry.h"

namespace {

using namespace std::chrono_literals;
using kinformer::bench::rchar;
using kinformer::bench::tcp_bytes_received;
using kinformer::bench::TcpBytes;
using SteadyClock = std::chrono::steady_clock;

struct Options {
  std::string kubeconfig;
  bool protobuf = true;
  bool gzip = true;
  bool watch_list = true;
  std::vector<std::string> resources{"pods", "secrets", "endpointslices"};
  std::string namespace_;
  std::size_t pods = 0;
  std::size_t secrets = 0;
  std::size_t slices = 0;
  double sync_timeout_s = 300;
  int settle_ms = 1000;
};

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "kinformer_sync_bench: " << why << "\n"
            << "usage: kinformer_sync_bench [--encoding protobuf|json] [--gzip on|off] "
               "[--list-mode watchlist|list]\n"
               "       [--pods N] [--secrets N] [--slices N] [--resources "
               "pods,secrets,endpointslices]\n"
               "       [--namespace NS] [--kubeconfig PATH] [--sync-timeout S] [--settle-ms MS]\n";
  std::exit(2);
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(a + " needs a value");
      return argv[++i];
    };
    try {
      if (a == "--kubeconfig") {
        o.kubeconfig = value();
      } else if (a == "--encoding") {
        std::string v = value();
        if (v != "protobuf" && v != "json") usage("--encoding must be protobuf or json");
        o.protobuf = v == "protobuf";
      } else if (a == "--gzip") {
        std::string v = value();
        if (v != "on" && v != "off") usage("--gzip must be on or off");
        o.gzip = v == "on";
      } else if (a == "--list-mode") {
        std::string v = value();
        if (v != "watchlist" && v != "list") usage("--list-mode must be watchlist or list");
        o.watch_list = v == "watchlist";
      } else if (a == "--resources") {
        o.resources = split(value());
      } else if (a == "--namespace") {
        o.namespace_ = value();
      } else if (a == "--pods") {
        o.pods = std::stoul(value());
      } else if (a == "--secrets") {
        o.secrets = std::stoul(value());
      } else if (a == "--slices") {
        o.slices = std::stoul(value());
      } else if (a == "--sync-timeout") {
        o.sync_timeout_s = std::stod(value());
      } else if (a == "--settle-ms") {
        o.settle_ms = std::stoi(value());
      } else {
        usage("unknown argument " + a);
      }
    } catch (const std::logic_error&) {
      usage("bad value for " + a);
    }
  }
  if (o.resources.empty()) usage("--resources is empty");
  for (const auto& r : o.resources) {
    if (r != "pods" && r != "secrets" && r != "endpointslices") usage("unknown resource " + r);
  }
  if (o.settle_ms < 0 || o.settle_ms > 60000) usage("--settle-ms must be in [0, 60000]");
  return o;
}

// Sum of the samples of counter family `name` whose label `label` is `value` ("" = any).
double counter_sum(const std::vector<prometheus::MetricFamily>& families, std::string_view name,
                   std::string_view label = "", std::string_view value = "") {
  double sum = 0;
  for (const auto& f : families) {
    if (f.name != name) continue;
    for (const auto& m : f.metric) {
      bool match = label.empty();
      for (const auto& l : m.label) {
        if (l.name == label && l.value == value) match = true;
      }
      if (match) sum += m.counter.value;
    }
  }
  return sum;
}

// One informer and its counting handler.
struct Tracked {
  std::string name;
  std::size_t want = 0;
  std::function<bool()> has_synced;
  std::function<std::size_t()> store_size;
  std::atomic<std::size_t> adds{0};
  std::int64_t synced_ns = 0;  // main thread only
  kinformer::informer::Registration registration;
};

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  namespace client = kinformer::client;
  namespace informer = kinformer::informer;

  client::KubeconfigOptions kc;
  if (!opt.kubeconfig.empty()) kc.path = opt.kubeconfig;
  client::ClusterConfig config = client::ClusterConfig::from_kubeconfig(kc);
  client::RestClientOptions rest_options;
  rest_options.user_agent = "kinformer-sync-bench/0.1";
  rest_options.protobuf = opt.protobuf;  // explicit in both modes
  rest_options.gzip = opt.gzip;          // likewise
  client::RestClient rest(config, rest_options);

  informer::FactoryOptions factory_options;
  factory_options.use_watch_list = opt.watch_list;
  auto metrics = std::make_shared<kinformer::prom::PrometheusRegistry>();
  factory_options.registry = metrics;
  informer::InformerFactory factory(
      [&rest](const client::ResourceType& t, const std::string& ns) {
        return rest.lister_watcher(t, ns);
      },
      std::move(factory_options));
  informer::InformerOptions informer_options;
  informer_options.namespace_ = opt.namespace_;
  informer_options.use_watch_list = opt.watch_list;

  std::vector<std::unique_ptr<Tracked>> all;
  std::function<std::uint64_t()> secret_data_bytes = [] { return std::uint64_t{0}; };
  auto track = [&]<typename T>(const std::string& name, std::size_t want) {
    auto inf = factory.informer<T>(informer_options);
    auto t = std::make_unique<Tracked>();
    t->name = name;
    t->want = want;
    t->has_synced = [inf] { return inf.has_synced(); };
    t->store_size = [inf] { return inf.store().size(); };
    typename informer::TypedInformer<T>::Handler h;
    std::atomic<std::size_t>* adds = &t->adds;
    h.add = [adds](const std::shared_ptr<const T>&, bool) {
      adds->fetch_add(1, std::memory_order_relaxed);
    };
    t->registration = inf.add_handler(std::move(h), {.name = "counter-" + name});
    all.push_back(std::move(t));
    return inf;
  };
  for (const auto& r : opt.resources) {
    if (r == "pods") {
      track.operator()<client::Pod>(r, opt.pods);
    } else if (r == "secrets") {
      auto inf = track.operator()<client::Secret>(r, opt.secrets);
      secret_data_bytes = [inf] {
        std::uint64_t n = 0;
        for (const auto& s : inf.store().list()) n += s->data.value_bytes();
        return n;
      };
    } else {
      track.operator()<client::EndpointSlice>(r, opt.slices);
    }
  }

  malloc_trim(0);
  const std::uint64_t baseline_kb = kinformer::bench::proc_status("VmRSS");
  const std::uint64_t rchar0 = rchar();
  const auto t0 = SteadyClock::now();
  factory.start();
  const auto deadline = t0 + std::chrono::duration<double>(opt.sync_timeout_s);
  bool synced = false;
  while (SteadyClock::now() < deadline) {
    bool done = true;
    for (auto& t : all) {
      if (t->synced_ns != 0) continue;
      if (t->adds.load(std::memory_order_relaxed) >= t->want && t->has_synced()) {
        t->synced_ns =
            std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyClock::now() - t0).count();
      } else {
        done = false;
      }
    }
    if (done) {
      synced = true;
      break;
    }
    std::this_thread::sleep_for(2ms);
  }
  const double sync_s =
      synced ? std::chrono::duration<double>(SteadyClock::now() - t0).count() : -1.0;
  const std::uint64_t peak_kb = kinformer::bench::proc_status("VmHWM");
  const std::uint64_t rchar_delta = rchar() - rchar0;
  const TcpBytes tcp = tcp_bytes_received();

  std::this_thread::sleep_for(std::chrono::milliseconds(opt.settle_ms / 2));
  malloc_trim(0);
  std::this_thread::sleep_for(std::chrono::milliseconds(opt.settle_ms / 2));
  const std::uint64_t steady_kb = kinformer::bench::proc_status("VmRSS");

  const auto families = metrics->registry().Collect();
  const double lists = counter_sum(families, "kinformer_requests_total", "verb", "list");
  const double watches = counter_sum(families, "kinformer_requests_total", "verb", "watch");
  const double fallbacks = counter_sum(families, "kinformer_watch_list_fallbacks_total");
  const std::uint64_t secret_data = secret_data_bytes();

  std::ostringstream per;
  std::size_t total = 0;
  for (std::size_t i = 0; i < all.size(); ++i) {
    const auto& t = *all[i];
    total += t.want;
    per << (i ? "," : "") << "\"" << t.name << "\":{\"expected\":" << t.want
        << ",\"objects\":" << t.store_size() << ",\"adds\":" << t.adds.load()
        << ",\"sync_s\":" << static_cast<double>(t.synced_ns) * 1e-9 << "}";
  }
  for (auto& t : all) t->registration.close();
  factory.shutdown();

  std::string resources;
  for (const auto& r : opt.resources) resources += (resources.empty() ? "" : ",") + r;
  std::ostringstream out;
  out.setf(std::ios::fixed);
  out.precision(6);
  out << "{\"side\":\"kinformer\",\"encoding\":\"" << (opt.protobuf ? "protobuf" : "json")
      << "\",\"gzip\":" << (opt.gzip ? "true" : "false") << ",\"list_mode\":\""
      << (opt.watch_list ? "watchlist" : "list") << "\",\"resources\":\"" << resources
      << "\",\"namespace\":\"" << opt.namespace_ << "\",\"objects\":" << total
      << ",\"per_resource\":{" << per.str() << "},\"synced\":" << (synced ? "true" : "false")
      << ",\"sync_s\":" << sync_s << ",\"baseline_rss_kb\":" << baseline_kb
      << ",\"peak_rss_kb\":" << peak_kb << ",\"steady_rss_kb\":" << steady_kb
      << ",\"tcp_bytes_received\":" << tcp.bytes << ",\"tcp_sockets\":" << tcp.sockets
      << ",\"rchar_bytes\":" << rchar_delta << ",\"list_requests\":" << lists
      << ",\"watch_requests\":" << watches << ",\"watch_list_fallbacks\":" << fallbacks
      << ",\"secret_data_bytes\":" << secret_data << "}";
  std::cout << out.str() << std::endl;
  return synced ? 0 : 1;
}
