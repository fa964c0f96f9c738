// kinformer_storm_bench: the reconnect-storm benchmark's kinformer side.
//
// One InformerFactory (default FactoryOptions, default RestClient) runs one Pod informer per
// namespace (<prefix>0 .. <prefix>N-1). Once every informer has synced the program writes
// --ready-file; the driver (tools/bench/storm.sh) then restarts the API server, writes
// --times-file ("<restart begin wall ns> <server ready wall ns>"), and merge-patches one Pod per
// namespace with the annotation bench.kinformer.dev/storm-marker = --marker.
//
// Recovered: an informer is recovered at the first moment one of its handler callbacks (add or
// update, from a watch event or a relist) sees a Pod whose marker annotation equals --marker.
// The marker is written only after the server is ready again, so seeing it means the informer's
// cache holds state from the restarted server. Time to recover = that moment (wall clock) minus
// the server-ready time the driver wrote (restart-apiserver returned: /readyz answered 200).
//
// Requests: the factory's ListerWatcher wraps the RestClient's and counts every list() (one per
// page) and watch() call, successful or not, with its wall-clock time. Peak reconnects per
// second: the most requests (lists + watches) in any 1 s bin from the restart's begin.
//
// Prints one JSON line on stdout. Every wait is bounded (--sync-timeout, --recover-timeout).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "kinformer/client/cluster_config.h"
#include "kinformer/client/object.h"
#include "kinformer/client/pod.h"
#include "kinformer/client/rest_client.h"
#include "kinformer/client/watch.h"
#include "kinformer/informer/informer_factory.h"

namespace {

using namespace std::chrono_literals;
using kinformer::bench::quantile;
using kinformer::client::Pod;
namespace client = kinformer::client;
namespace informer = kinformer::informer;

constexpr std::string_view kMarkerAnnotation = "bench.kinformer.dev/storm-marker";

std::int64_t wall_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct Options {
  std::string kubeconfig;
  std::string prefix = "storm-";
  std::size_t namespaces = 50;
  std::string marker;
  std::string ready_file;
  std::string times_file;
  double sync_timeout_s = 120;
  double recover_timeout_s = 180;
  bool list = false;  // --list: LIST syncs instead of the factory's default (WatchList)
};

[[noreturn]] void usage(const std::string& why) {
  std::cerr
      << "kinformer_storm_bench: " << why
      << "\nusage: kinformer_storm_bench --marker V --ready-file F --times-file F [--namespaces 50]"
         " [--prefix storm-] [--kubeconfig F] [--sync-timeout S] [--recover-timeout S] [--list]\n";
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(a + " needs a value");
      return argv[++i];
    };
    if (a == "--kubeconfig")
      o.kubeconfig = value();
    else if (a == "--prefix")
      o.prefix = value();
    else if (a == "--namespaces")
      o.namespaces = std::stoul(value());
    else if (a == "--marker")
      o.marker = value();
    else if (a == "--ready-file")
      o.ready_file = value();
    else if (a == "--times-file")
      o.times_file = value();
    else if (a == "--sync-timeout")
      o.sync_timeout_s = std::stod(value());
    else if (a == "--recover-timeout")
      o.recover_timeout_s = std::stod(value());
    else if (a == "--list")
      o.list = true;
    else
      usage("unknown argument " + a);
  }
  if (o.marker.empty() || o.ready_file.empty() || o.times_file.empty())
    usage("--marker, --ready-file and --times-file are required");
  if (o.namespaces == 0 || o.namespaces > 1000) usage("--namespaces in [1, 1000]");
  return o;
}

// Every request the informers send, with its time and outcome.
class RequestLog {
 public:
  enum class Kind { list, watch, watch_list };
  struct Entry {
    std::int64_t ns;
    Kind kind;
    bool ok;
  };
  void add(Kind kind, bool ok) {
    std::lock_guard lock(mu_);
    entries_.push_back({wall_ns(), kind, ok});
  }
  std::vector<Entry> entries() {
    std::lock_guard lock(mu_);
    return entries_;
  }

 private:
  std::mutex mu_;
  std::vector<Entry> entries_;  // guarded by mu_
};

class CountingListerWatcher final : public client::ListerWatcher {
 public:
  CountingListerWatcher(client::ListerWatcherPtr real, std::shared_ptr<RequestLog> log)
      : real_(std::move(real)), log_(std::move(log)) {}
  client::Result<client::ObjectList> list(const client::ListOptions& options) override {
    auto r = real_->list(options);
    log_->add(RequestLog::Kind::list, static_cast<bool>(r));
    return r;
  }
  client::Result<client::WatchStreamPtr> watch(const client::ListOptions& options) override {
    auto r = real_->watch(options);
    log_->add(options.send_initial_events ? RequestLog::Kind::watch_list : RequestLog::Kind::watch,
              static_cast<bool>(r));
    return r;
  }

 private:
  client::ListerWatcherPtr real_;
  std::shared_ptr<RequestLog> log_;
};

struct Slot {
  std::atomic<std::int64_t> seen_ns{0};
};

bool read_times(const std::string& path, std::int64_t& begin, std::int64_t& ready) {
  std::ifstream in(path);
  return static_cast<bool>(in >> begin >> ready);
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  client::KubeconfigOptions kc;
  if (!opt.kubeconfig.empty()) kc.path = opt.kubeconfig;
  client::RestClient rest(client::ClusterConfig::from_kubeconfig(kc),
                          {.user_agent = "kinformer-storm-bench/0.1"});

  auto requests = std::make_shared<RequestLog>();
  informer::InformerFactory factory(
      [&rest, requests](const client::ResourceType& t,
                        const std::string& ns) -> client::ListerWatcherPtr {
        return std::make_unique<CountingListerWatcher>(rest.lister_watcher(t, ns), requests);
      });

  std::vector<std::unique_ptr<Slot>> slots;
  std::vector<informer::Registration> registrations;
  std::vector<informer::TypedInformer<Pod>> informers;
  for (std::size_t i = 0; i < opt.namespaces; ++i) {
    informer::InformerOptions io;
    io.namespace_ = opt.prefix + std::to_string(i);
    if (opt.list) io.use_watch_list = false;
    informers.push_back(factory.informer<Pod>(io));
    slots.push_back(std::make_unique<Slot>());
    Slot* s = slots.back().get();
    auto check = [s, marker = opt.marker](const std::shared_ptr<const Pod>& pod) {
      const std::string* v = client::find_value(pod->metadata.annotations, kMarkerAnnotation);
      if (v == nullptr || *v != marker) return;
      std::int64_t zero = 0;
      s->seen_ns.compare_exchange_strong(zero, wall_ns());
    };
    informer::TypedInformer<Pod>::Handler h;
    h.add = [check](const std::shared_ptr<const Pod>& p, bool) { check(p); };
    h.update = [check](const std::shared_ptr<const Pod>&, const std::shared_ptr<const Pod>& p) {
      check(p);
    };
    registrations.push_back(informers.back().add_handler(std::move(h), {.name = "storm-marker"}));
  }

  const std::int64_t t_start = wall_ns();
  factory.start();
  const bool synced =
      factory.wait_for_cache_sync(std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::duration<double>(opt.sync_timeout_s)));
  const double sync_s = static_cast<double>(wall_ns() - t_start) * 1e-9;
  if (!synced) {
    std::cerr << "kinformer_storm_bench: not synced within " << opt.sync_timeout_s << " s\n";
    return 1;
  }
  std::ofstream(opt.ready_file) << "ready\n";

  // Wait until every informer saw the marker, or the timeout.
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(opt.recover_timeout_s);
  auto all_seen = [&] {
    return std::all_of(slots.begin(), slots.end(),
                       [](const auto& s) { return s->seen_ns.load() != 0; });
  };
  while (!all_seen() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(20ms);
  std::int64_t begin_ns = 0;
  std::int64_t ready_ns = 0;
  while (!read_times(opt.times_file, begin_ns, ready_ns) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  const std::uint64_t denials = factory.reconnect_budget().denials();
  for (auto& r : registrations) r.close();
  factory.shutdown();

  std::vector<double> recover_s;
  std::int64_t last_seen = 0;
  std::size_t recovered = 0;
  for (const auto& s : slots) {
    std::int64_t t = s->seen_ns.load();
    if (t == 0) continue;
    ++recovered;
    last_seen = std::max(last_seen, t);
    recover_s.push_back(static_cast<double>(t - ready_ns) * 1e-9);
  }
  // Requests from the restart's begin until the last informer recovered (or the end).
  const std::int64_t until = last_seen != 0 && recovered == slots.size() ? last_seen : wall_ns();
  std::size_t lists = 0, watches = 0, watch_lists = 0, failed = 0;
  std::map<std::int64_t, std::size_t> per_second;
  for (const auto& e : requests->entries()) {
    if (begin_ns == 0 || e.ns < begin_ns || e.ns > until) continue;
    switch (e.kind) {
      case RequestLog::Kind::list:
        ++lists;
        break;
      case RequestLog::Kind::watch:
        ++watches;
        break;
      case RequestLog::Kind::watch_list:
        ++watch_lists;
        break;
    }
    if (!e.ok) ++failed;
    ++per_second[(e.ns - begin_ns) / 1'000'000'000];
  }
  std::size_t peak = 0;
  for (const auto& [sec, n] : per_second) peak = std::max(peak, n);
  std::ostringstream out;
  out.setf(std::ios::fixed);
  out.precision(3);
  out << "{\"side\":\"kinformer\",\"watch_list\":" << (opt.list ? "false" : "true")
      << ",\"informers\":" << slots.size() << ",\"sync_s\":" << sync_s
      << ",\"recovered\":" << recovered << ",\"recover_p50_s\":" << quantile(recover_s, 0.5)
      << ",\"recover_max_s\":" << quantile(recover_s, 1.0)
      << ",\"downtime_s\":" << static_cast<double>(ready_ns - begin_ns) * 1e-9
      << ",\"lists\":" << lists << ",\"watches\":" << watches << ",\"watch_lists\":" << watch_lists
      << ",\"failed_requests\":" << failed << ",\"peak_requests_per_s\":" << peak
      << ",\"budget_denials\":" << denials << ",\"per_second\":[";
  bool first = true;
  for (const auto& [sec, n] : per_second) {
    out << (first ? "" : ",") << "[" << sec << "," << n << "]";
    first = false;
  }
  out << "]}";
  std::cout << out.str() << std::endl;
  return recovered == slots.size() ? 0 : 3;
}
