// kinformer_fanout_bench: one Pod informer on a real API server fanned out to N counting
// handlers. Built on kinformer's public API only. Its client-go peer,
// tools/bench/cmd/clientgo-fanout, measures the same things the same way; tools/bench/fanout.sh
// runs both, interleaved, and prints the table (see docs/BENCHMARKS.md).
//
// One run of this program:
//   1. starts a factory with one Pod informer on --namespace and N handlers registered before
//      start; measures the time from start() until every (non-stuck) handler has counted
//      --pods adds (the initial list) and the process's threads (/proc/self/status Threads);
//   2. writes --ready-file, waits for the first update (the driver starts the patcher then),
//      waits --warmup-seconds, then counts delivered notifications and records delivery latency
//      for --window-seconds;
//   3. prints one JSON object on stdout.
//
// Latency, measured identically in the client-go peer: the informer's transform (called once
// per object on the reflector thread, just before the store update) writes the receipt time
// (steady clock, ns) into the annotation bench.kinformer.dev/recv; each handler's update callback
// subtracts it from its own clock ("receipt to callback"). The patcher also writes its wall
// clock into bench.kinformer.dev/sent; handlers subtract that from the wall clock ("end to end":
// patch request, server, watch, decode, store, fan-out).
//
// With --stuck 1, handler 0 blocks in its first callback until the run ends (released just
// before shutdown); it is left out of the sync time, the counts and the latency.
//
// With --stuck-phases 1, one process measures both sides of the stuck-handler comparison: the
// window is cut into three equal phases, "before" (no handler stuck), "stuck" (handler 0 blocks
// in its first callback after the phase starts, and stays blocked until it ends) and "after"
// (released: it works off its coalesced backlog). Handler 0 is left out of the sync time, the
// counts and the latency in every phase, so each phase measures the same 99 handlers; each
// callback is counted in the phase it ran in. The output's phase_* arrays hold the three phases.
// Runs of separate processes differ by more than a stuck handler does (memory layout, thread
// placement, the machine's state), so a within-process comparison is the sharper one.
// --stuck-phases 2 is its control: the same three phases, and handler 0 never blocks, so the
// differences between phases that are not the stuck handler's show.
//
// With --source synthetic, the events come from this process instead of the server, so that the
// fan-out path (store update -> handler queues -> callbacks) is measured at a rate the server on
// a small machine cannot produce: the factory's ListerWatcher wraps the RestClient's; list() goes
// to the real server unchanged (the initial list is the real Pods) and remembers the listed
// Pods; watch() returns a SyntheticStream that, once the program is synced, emits `modified`
// events paced to --rate on an absolute schedule (event i at start + i/rate; a late consumer
// gets the overdue events at once, so the asked rate is not lowered silently, and the achieved
// rate is reported). Event i is a copy of listed Pod i mod N with resourceVersion
// list RV + i + 1, label bench-seq = i and annotation bench.kinformer.dev/sent = wall clock, as
// the patcher writes them. The receipt stamp is the transform's, unchanged. The events are made
// in next(), i.e. on the reflector thread (the real stream decodes there too). The stream ends
// (nullopt) when the run ends; a watch opened after that blocks until cancelled. The output's
// source_lateness_* is how late the reflector asked for event i (now - its scheduled time, over
// the whole run): a stalled reflector shows there. steal_window_s is the machine's steal time in
// the window (/proc/stat), for telling a VM's held CPUs from the library's own delays.

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
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
using kinformer::bench::cpu_seconds;
using kinformer::bench::Histogram;
using kinformer::bench::proc_status;
using kinformer::bench::steal_seconds;
using kinformer::bench::thread_count;
using kinformer::client::Pod;
using SteadyClock = std::chrono::steady_clock;

constexpr std::string_view kRecvAnnotation = "bench.kinformer.dev/recv";
constexpr std::string_view kSentAnnotation = "bench.kinformer.dev/sent";

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyClock::now().time_since_epoch())
      .count();
}
std::int64_t wall_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct Options {
  std::string kubeconfig;
  std::string namespace_ = "fanout-bench";
  std::size_t pods = 5000;
  std::size_t handlers = 1;
  bool stuck = false;
  int stuck_phases = 0;  // --stuck-phases: 0 off, 1 handler 0 stuck in the middle phase, 2 control
  double warmup_s = 1.0;
  double window_s = 8.0;
  double sync_timeout_s = 180.0;
  double events_timeout_s = 30.0;
  std::string ready_file;
  bool no_events = false;
  bool watch_list = false;
  std::size_t pool_threads = 0;
  bool synthetic = false;  // --source synthetic
  double rate = 5000;      // --rate: synthetic events/s
  bool batch_hint = true;  // --batch-hint 0: the synthetic stream reports nothing buffered
};

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "kinformer_fanout_bench: " << why << "\n"
            << "usage: kinformer_fanout_bench --pods N --handlers N [--namespace NS] [--kubeconfig "
               "PATH]\n"
               "       [--stuck 0|1] [--stuck-phases 0|1|2] [--warmup-seconds S] [--window-seconds "
               "S] [--ready-file PATH]\n"
               "       [--sync-timeout S] [--events-timeout S] [--no-events] [--watch-list] "
               "[--pool-threads N]\n"
               "       [--source server|synthetic] [--rate EVENTS_PER_S] [--batch-hint 0|1]\n";
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
    try {
      if (a == "--kubeconfig")
        o.kubeconfig = value();
      else if (a == "--namespace")
        o.namespace_ = value();
      else if (a == "--pods")
        o.pods = std::stoul(value());
      else if (a == "--handlers")
        o.handlers = std::stoul(value());
      else if (a == "--stuck")
        o.stuck = std::stoul(value()) != 0;
      else if (a == "--stuck-phases")
        o.stuck_phases = static_cast<int>(std::stoul(value()));
      else if (a == "--warmup-seconds")
        o.warmup_s = std::stod(value());
      else if (a == "--window-seconds")
        o.window_s = std::stod(value());
      else if (a == "--sync-timeout")
        o.sync_timeout_s = std::stod(value());
      else if (a == "--events-timeout")
        o.events_timeout_s = std::stod(value());
      else if (a == "--ready-file")
        o.ready_file = value();
      else if (a == "--no-events")
        o.no_events = true;
      else if (a == "--watch-list")
        o.watch_list = true;
      else if (a == "--pool-threads")
        o.pool_threads = std::stoul(value());
      else if (a == "--rate")
        o.rate = std::stod(value());
      else if (a == "--batch-hint")
        o.batch_hint = value() != "0";
      else if (a == "--source") {
        std::string v = value();
        if (v != "server" && v != "synthetic") usage("--source must be server or synthetic");
        o.synthetic = v == "synthetic";
      } else
        usage("unknown argument " + a);
    } catch (const std::logic_error&) {
      usage("bad value for " + a);
    }
  }
  if (o.handlers == 0 || o.handlers > 100000) usage("--handlers must be in [1, 100000]");
  if (o.stuck && o.handlers < 2) usage("--stuck needs at least 2 handlers");
  if (o.stuck_phases < 0 || o.stuck_phases > 2) usage("--stuck-phases must be 0, 1 or 2");
  if (o.stuck_phases != 0 && o.handlers < 2) usage("--stuck-phases needs at least 2 handlers");
  if (o.stuck && o.stuck_phases != 0) usage("--stuck and --stuck-phases exclude each other");
  if (o.window_s <= 0 || o.window_s > 600) usage("--window-seconds must be in (0, 600]");
  if (!(o.rate > 0 && o.rate <= 1e6)) usage("--rate must be in (0, 1000000]");
  if (o.synthetic && o.watch_list)
    usage("--source synthetic lists with paged LIST; drop --watch-list");
  return o;
}

std::optional<std::int64_t> annotation_ns(const kinformer::client::StringMap& annotations,
                                          std::string_view key) {
  const std::string* v = kinformer::client::find_value(annotations, key);
  if (v == nullptr) return std::nullopt;
  std::int64_t out = 0;
  auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
  if (ec != std::errc{} || p != v->data() + v->size()) return std::nullopt;
  return out;
}

// Shared by every handler.
struct Shared {
  std::size_t pods = 0;
  std::size_t counted_handlers = 0;  // handlers that must finish the initial list
  std::atomic<std::size_t> synced_handlers{0};
  std::atomic<std::int64_t> sync_done_ns{0};
  std::atomic<bool> first_update{false};
  std::atomic<bool> recording{false};
  bool stuck_phases = false;
  // --stuck-phases: the phase callbacks are counted in (0 before, 1 stuck, 2 after), and whether
  // handler 0 must block at its next callback.
  std::atomic<int> phase{0};
  std::atomic<bool> block_now{false};
  // The stuck handler waits here until released (bounded: it gives up after 10 minutes).
  std::mutex stuck_mu;
  std::condition_variable stuck_cv;
  bool released = false;  // guarded by stuck_mu
};

// One counting handler. Counters are atomics only so that the main thread can read them while
// the handler's strand writes them; the histograms are read only after shutdown.
struct alignas(64) Counter {
  std::atomic<std::uint64_t> adds{0};
  std::atomic<std::uint64_t> updates{0};
  std::atomic<std::uint64_t> deletes{0};
  bool stuck = false;
  bool blocked_once = false;
  Histogram latency;
  Histogram end_to_end;
  std::unique_ptr<std::array<Histogram, 3>> phase_latency;  // --stuck-phases only

  [[nodiscard]] std::uint64_t total() const {
    return adds.load(std::memory_order_relaxed) + updates.load(std::memory_order_relaxed) +
           deletes.load(std::memory_order_relaxed);
  }
};

void block_if_stuck(Counter& c, Shared& s) {
  if (!c.stuck || c.blocked_once) return;
  if (s.stuck_phases && !s.block_now.load(std::memory_order_acquire)) return;
  c.blocked_once = true;
  std::unique_lock lock(s.stuck_mu);
  s.stuck_cv.wait_for(lock, 10min, [&] { return s.released; });
}

// Inserts or replaces `key` in a sorted StringMap.
void set_sorted(kinformer::client::StringMap& map, std::string_view key, std::string value) {
  auto it = std::lower_bound(map.begin(), map.end(), key,
                             [](const auto& kv, std::string_view k) { return kv.first < k; });
  if (it != map.end() && it->first == key) {
    it->second = std::move(value);
  } else {
    map.insert(it, {std::string(key), std::move(value)});
  }
}

std::uint64_t parse_rv(const std::string& rv) {
  std::uint64_t out = 0;
  auto [p, ec] = std::from_chars(rv.data(), rv.data() + rv.size(), out);
  return ec == std::errc{} && p == rv.data() + rv.size() ? out : 0;
}

// The synthetic steady event source (--source synthetic), shared by every stream the reflector
// opens: the schedule (event i at start + i/rate) runs across re-watches.
class SyntheticSource {
 public:
  // batch_hint false: buffered() reports nothing, so the reflector hands over one event at a
  // time (the library before the watch-path batching), for an A/B on the same build.
  SyntheticSource(double rate, bool batch_hint) : rate_(rate), batch_hint_(batch_hint) {}

  // Called with every page the real list returned: the listed Pods are the events' templates.
  void on_list_page(const kinformer::client::ListOptions& opts,
                    const kinformer::client::ObjectList& page) {
    std::lock_guard lock(mu_);
    if (opts.continue_token.empty()) {
      paging_.clear();
      paging_rv_ = 0;
    }
    for (const auto& o : page.items) {
      if (auto pod = std::dynamic_pointer_cast<const Pod>(o)) {
        paging_.push_back(pod);
        paging_rv_ = std::max(paging_rv_, parse_rv(pod->metadata.resource_version));
      }
    }
    paging_rv_ = std::max(paging_rv_, parse_rv(page.resource_version));
    if (page.continue_token.empty()) {
      pods_ = std::move(paging_);
      paging_.clear();
      base_rv_ = paging_rv_;
    }
  }

  // Starts the schedule now; events stop at the latest after `max_run` (a safety bound: main
  // calls finish() after its window).
  void start(std::chrono::duration<double> max_run) {
    {
      std::lock_guard lock(mu_);
      if (started_) return;
      started_ = true;
      t0_ = SteadyClock::now();
      end_ = t0_ + std::chrono::duration_cast<SteadyClock::duration>(max_run);
    }
    cv_.notify_all();
  }
  void finish() {
    {
      std::lock_guard lock(mu_);
      finished_ = true;
    }
    cv_.notify_all();
  }
  [[nodiscard]] std::uint64_t emitted() const { return emitted_.load(std::memory_order_relaxed); }
  [[nodiscard]] std::size_t templates() const {
    std::lock_guard lock(mu_);
    return pods_.size();
  }
  // How late the reflector asked for its events (now - scheduled time), over the whole run.
  [[nodiscard]] Histogram lateness() const {
    std::lock_guard lock(mu_);
    return lateness_;
  }

  // One stream's state, guarded by mu_.
  struct StreamState {
    bool cancelled = false;
    bool opened_after_run = false;
  };
  StreamState open() {
    std::lock_guard lock(mu_);
    return StreamState{.cancelled = false, .opened_after_run = finished_};
  }
  void cancel(StreamState& s) {
    {
      std::lock_guard lock(mu_);
      s.cancelled = true;
    }
    cv_.notify_all();
  }

  // The events already due (next() returns them without waiting), as a network stream reports
  // the events it has received and decoded: the reflector batches them.
  std::size_t buffered(const StreamState& s) const {
    std::lock_guard lock(mu_);
    if (!batch_hint_ || s.cancelled || s.opened_after_run || !started_ || finished_ ||
        pods_.empty()) {
      return 0;
    }
    const double elapsed = std::chrono::duration<double>(SteadyClock::now() - t0_).count();
    const double due = std::floor(elapsed * rate_) + 1 - static_cast<double>(next_);
    return due > 0 ? static_cast<std::size_t>(due) : 0;
  }

  kinformer::client::Result<std::optional<kinformer::client::WatchEvent>> next(StreamState& s) {
    namespace client = kinformer::client;
    auto cancelled = [] {
      return client::Error::make(client::Errc::cancelled, "synthetic watch cancelled");
    };
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return s.cancelled || started_ || finished_; });
    if (s.cancelled) return cancelled();
    if (s.opened_after_run) {  // the run is over: an idle watch until shutdown
      cv_.wait(lock, [&] { return s.cancelled; });
      return cancelled();
    }
    if (finished_ || pods_.empty()) {
      finished_ = true;
      return std::optional<client::WatchEvent>{};
    }
    const std::uint64_t i = next_;
    const auto due = t0_ + std::chrono::duration_cast<SteadyClock::duration>(
                               std::chrono::duration<double>(static_cast<double>(i) / rate_));
    if (due >= end_) {
      finished_ = true;
      lock.unlock();
      cv_.notify_all();
      return std::optional<client::WatchEvent>{};
    }
    // Absolute schedule: no wait at all when the consumer is behind.
    if (cv_.wait_until(lock, due, [&] { return s.cancelled || finished_; })) {
      if (s.cancelled) return cancelled();
      return std::optional<client::WatchEvent>{};
    }
    ++next_;
    lateness_.add(
        std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyClock::now() - due).count());
    std::shared_ptr<const Pod> tmpl = pods_[i % pods_.size()];
    const std::uint64_t rv = base_rv_ + i + 1;
    lock.unlock();

    auto pod = std::make_shared<Pod>(*tmpl);  // the typed object, copied
    pod->metadata.resource_version = std::to_string(rv);
    set_sorted(pod->metadata.labels, "bench-seq", std::to_string(i));
    set_sorted(pod->metadata.annotations, kSentAnnotation, std::to_string(wall_ns()));
    emitted_.fetch_add(1, std::memory_order_relaxed);
    return std::optional<client::WatchEvent>{
        client::WatchEvent{client::EventType::modified, std::move(pod)}};
  }

 private:
  const double rate_;
  const bool batch_hint_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<const Pod>> paging_;  // guarded by mu_
  std::uint64_t paging_rv_ = 0;                     // guarded by mu_
  std::vector<std::shared_ptr<const Pod>> pods_;    // guarded by mu_
  std::uint64_t base_rv_ = 0;                       // guarded by mu_
  bool started_ = false;                            // guarded by mu_
  bool finished_ = false;                           // guarded by mu_
  SteadyClock::time_point t0_;                      // guarded by mu_
  SteadyClock::time_point end_;                     // guarded by mu_
  std::uint64_t next_ = 0;                          // guarded by mu_
  Histogram lateness_;                              // guarded by mu_: now - due, per event
  std::atomic<std::uint64_t> emitted_{0};
};

class SyntheticStream final : public kinformer::client::WatchStream {
 public:
  explicit SyntheticStream(std::shared_ptr<SyntheticSource> src)
      : src_(std::move(src)), state_(src_->open()) {}
  ~SyntheticStream() override { cancel(); }
  SyntheticStream(const SyntheticStream&) = delete;
  SyntheticStream& operator=(const SyntheticStream&) = delete;
  kinformer::client::Result<std::optional<kinformer::client::WatchEvent>> next() override {
    return src_->next(state_);
  }
  void cancel() override { src_->cancel(state_); }
  [[nodiscard]] std::size_t buffered() const override { return src_->buffered(state_); }

 private:
  std::shared_ptr<SyntheticSource> src_;
  SyntheticSource::StreamState state_;
};

// list(): the real server; watch(): the synthetic source.
class SyntheticListerWatcher final : public kinformer::client::ListerWatcher {
 public:
  SyntheticListerWatcher(kinformer::client::ListerWatcherPtr real,
                         std::shared_ptr<SyntheticSource> src)
      : real_(std::move(real)), src_(std::move(src)) {}
  kinformer::client::Result<kinformer::client::ObjectList> list(
      const kinformer::client::ListOptions& options) override {
    auto page = real_->list(options);
    if (page) src_->on_list_page(options, page.value());
    return page;
  }
  kinformer::client::Result<kinformer::client::WatchStreamPtr> watch(
      const kinformer::client::ListOptions&) override {
    return kinformer::client::WatchStreamPtr(std::make_unique<SyntheticStream>(src_));
  }

 private:
  kinformer::client::ListerWatcherPtr real_;
  std::shared_ptr<SyntheticSource> src_;
};

std::string json_escape(std::string_view s) {
  std::string out;
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  namespace client = kinformer::client;
  namespace informer = kinformer::informer;

  client::KubeconfigOptions kc;
  if (!opt.kubeconfig.empty()) kc.path = opt.kubeconfig;
  client::ClusterConfig config = client::ClusterConfig::from_kubeconfig(kc);
  client::RestClient rest(config, {.user_agent = "kinformer-fanout-bench/0.1"});

  informer::FactoryOptions factory_options;
  factory_options.handler_stop_timeout = 2000ms;
  factory_options.executor.threads = opt.pool_threads;
  std::shared_ptr<SyntheticSource> synthetic;
  if (opt.synthetic) synthetic = std::make_shared<SyntheticSource>(opt.rate, opt.batch_hint);
  informer::InformerFactory factory(
      [&rest, synthetic](const client::ResourceType& t,
                         const std::string& ns) -> client::ListerWatcherPtr {
        if (synthetic)
          return std::make_unique<SyntheticListerWatcher>(rest.lister_watcher(t, ns), synthetic);
        return rest.lister_watcher(t, ns);
      },
      std::move(factory_options));

  // The stamping transform: kinformer's decoder already drops managedFields, so the only work
  // left is the receipt stamp (a copy of the Pod with one annotation inserted in order).
  kinformer::cache::Transform stamp{
      .name = "bench-recv-stamp", .fn = [](client::ObjectPtr o) -> client::ObjectPtr {
        const std::int64_t now = steady_ns();
        auto pod = std::make_shared<Pod>(static_cast<const Pod&>(*o));
        auto& ann = pod->metadata.annotations;
        auto it = std::lower_bound(ann.begin(), ann.end(), kRecvAnnotation,
                                   [](const auto& kv, std::string_view k) { return kv.first < k; });
        if (it != ann.end() && it->first == kRecvAnnotation) {
          it->second = std::to_string(now);
        } else {
          ann.insert(it, {std::string(kRecvAnnotation), std::to_string(now)});
        }
        return pod;
      }};

  informer::InformerOptions informer_options;
  informer_options.namespace_ = opt.namespace_;
  informer_options.transform = stamp;
  informer_options.use_watch_list = opt.watch_list;
  auto pods = factory.informer<Pod>(informer_options);

  Shared shared;
  shared.pods = opt.pods;
  shared.counted_handlers = opt.handlers - (opt.stuck || opt.stuck_phases != 0 ? 1 : 0);
  shared.stuck_phases = opt.stuck_phases != 0;
  std::vector<std::unique_ptr<Counter>> counters;
  std::vector<informer::Registration> registrations;
  counters.reserve(opt.handlers);
  registrations.reserve(opt.handlers);
  for (std::size_t i = 0; i < opt.handlers; ++i) {
    counters.push_back(std::make_unique<Counter>());
    Counter* c = counters.back().get();
    c->stuck = (opt.stuck || opt.stuck_phases != 0) && i == 0;
    if (opt.stuck_phases != 0) c->phase_latency = std::make_unique<std::array<Histogram, 3>>();
    Shared* s = &shared;
    informer::TypedInformer<Pod>::Handler h;
    h.add = [c, s](const std::shared_ptr<const Pod>&, bool) {
      block_if_stuck(*c, *s);
      std::uint64_t n = c->adds.fetch_add(1, std::memory_order_relaxed) + 1;
      if (n == s->pods && !c->stuck) {
        if (s->synced_handlers.fetch_add(1) + 1 == s->counted_handlers)
          s->sync_done_ns.store(steady_ns());
      }
    };
    h.update = [c, s](const std::shared_ptr<const Pod>&, const std::shared_ptr<const Pod>& pod) {
      block_if_stuck(*c, *s);
      c->updates.fetch_add(1, std::memory_order_relaxed);
      if (!s->first_update.load(std::memory_order_relaxed)) s->first_update.store(true);
      if (!s->recording.load(std::memory_order_acquire)) return;
      const auto& ann = pod->metadata.annotations;
      if (auto recv = annotation_ns(ann, kRecvAnnotation)) {
        const std::int64_t v = steady_ns() - *recv;
        c->latency.add(v);
        if (c->phase_latency) (*c->phase_latency)[s->phase.load(std::memory_order_relaxed)].add(v);
      }
      if (auto sent = annotation_ns(ann, kSentAnnotation)) c->end_to_end.add(wall_ns() - *sent);
    };
    h.del = [c, s](const std::shared_ptr<const Pod>&, bool) {
      block_if_stuck(*c, *s);
      c->deletes.fetch_add(1, std::memory_order_relaxed);
    };
    registrations.push_back(
        pods.add_handler(std::move(h), {.name = "counter-" + std::to_string(i)}));
  }

  std::size_t threads_max = thread_count();
  const std::int64_t t0 = steady_ns();
  factory.start();
  const auto sync_deadline = SteadyClock::now() + std::chrono::duration<double>(opt.sync_timeout_s);
  bool synced = true;
  while (shared.sync_done_ns.load() == 0) {
    if (SteadyClock::now() > sync_deadline) {
      synced = false;
      break;
    }
    std::this_thread::sleep_for(5ms);
    threads_max = std::max(threads_max, thread_count());
  }
  const double sync_s = synced ? static_cast<double>(shared.sync_done_ns.load() - t0) * 1e-9 : -1;
  const std::size_t threads_synced = thread_count();
  threads_max = std::max(threads_max, threads_synced);
  const std::size_t store_size = pods.store().size();
  const std::size_t peak_rss_sync_kb = proc_status("VmHWM");

  if (!opt.ready_file.empty()) {
    std::ofstream(opt.ready_file) << "ready\n";
  }
  if (synthetic && synced && !opt.no_events) {
    synthetic->start(
        std::chrono::duration<double>(opt.events_timeout_s + opt.warmup_s + opt.window_s + 10));
  }

  bool events_seen = false;
  double window_s = 0;
  double cpu_window_s = 0;
  double steal_window_s = 0;
  std::uint64_t delivered = 0;
  std::uint64_t source_events = 0;
  Histogram lateness;  // synthetic source: the whole run's
  if (synced && !opt.no_events) {
    const auto events_deadline =
        SteadyClock::now() + std::chrono::duration<double>(opt.events_timeout_s);
    while (!shared.first_update.load() && SteadyClock::now() < events_deadline)
      std::this_thread::sleep_for(5ms);
    events_seen = shared.first_update.load();
    if (events_seen) {
      std::this_thread::sleep_for(std::chrono::duration<double>(opt.warmup_s));
      auto sum = [&] {
        std::uint64_t t = 0;
        for (const auto& c : counters) {
          if (!c->stuck) t += c->total();
        }
        return t;
      };
      shared.recording.store(true, std::memory_order_release);
      const std::uint64_t n0 = sum();
      const std::uint64_t e0 = synthetic ? synthetic->emitted() : 0;
      const double cpu0 = cpu_seconds();
      const double steal0 = steal_seconds();
      const auto w0 = SteadyClock::now();
      const auto w_end = w0 + std::chrono::duration<double>(opt.window_s);
      const auto phase_length = std::chrono::duration<double>(opt.window_s / 3);
      while (SteadyClock::now() < w_end) {
        std::this_thread::sleep_for(opt.stuck_phases != 0 ? 10ms : 50ms);
        threads_max = std::max(threads_max, thread_count());
        if (opt.stuck_phases == 0) continue;
        const auto now = SteadyClock::now();
        if (shared.phase.load() == 0 && now >= w0 + phase_length) {
          shared.phase.store(1);
          if (opt.stuck_phases == 1) shared.block_now.store(true, std::memory_order_release);
        } else if (shared.phase.load() == 1 && now >= w0 + 2 * phase_length) {
          shared.phase.store(2);
          {
            std::lock_guard lock(shared.stuck_mu);
            shared.released = true;
          }
          shared.stuck_cv.notify_all();
        }
      }
      const std::uint64_t n1 = sum();
      source_events = synthetic ? synthetic->emitted() - e0 : 0;
      if (synthetic) lateness = synthetic->lateness();
      cpu_window_s = cpu_seconds() - cpu0;
      steal_window_s = steal_seconds() - steal0;
      window_s = std::chrono::duration<double>(SteadyClock::now() - w0).count();
      shared.recording.store(false, std::memory_order_release);
      delivered = n1 - n0;
    }
  }
  if (synthetic) synthetic->finish();
  const std::size_t threads_end = thread_count();
  threads_max = std::max(threads_max, threads_end);
  const std::size_t pool = factory.executor().pool_size();
  const std::uint64_t extra_started = factory.executor().extra_threads_started();

  {
    std::lock_guard lock(shared.stuck_mu);
    shared.released = true;
  }
  shared.stuck_cv.notify_all();
  for (auto& r : registrations) r.close();
  factory.shutdown();

  Histogram latency;
  Histogram end_to_end;
  std::array<Histogram, 3> phase_latency;
  for (const auto& c : counters) {
    if (c->stuck) continue;
    latency.merge(c->latency);
    end_to_end.merge(c->end_to_end);
    if (c->phase_latency) {
      for (std::size_t p = 0; p < 3; ++p) phase_latency[p].merge((*c->phase_latency)[p]);
    }
  }
  auto phase_array = [&](double q) {
    std::string a = "[";
    for (std::size_t p = 0; p < 3; ++p) {
      if (p > 0) a += ",";
      a += std::to_string(static_cast<double>(phase_latency[p].quantile(q)) / 1e3);
    }
    return a + "]";
  };
  const std::size_t counted = shared.counted_handlers;
  std::ostringstream out;
  out.setf(std::ios::fixed);
  out.precision(6);
  out << "{\"side\":\"kinformer\",\"handlers\":" << opt.handlers
      << ",\"stuck\":" << (opt.stuck ? 1 : 0) << ",\"stuck_phases\":" << opt.stuck_phases
      << ",\"pods\":" << opt.pods << ",\"namespace\":\"" << json_escape(opt.namespace_) << "\""
      << ",\"synced\":" << (synced ? "true" : "false") << ",\"sync_s\":" << sync_s
      << ",\"store_size\":" << store_size << ",\"peak_rss_sync_mb\":" << peak_rss_sync_kb / 1024
      << ",\"initial_notifications_per_s\":"
      << (sync_s > 0 ? static_cast<double>(counted * opt.pods) / sync_s : 0.0)
      << ",\"threads_synced\":" << threads_synced << ",\"threads_max\":" << threads_max
      << ",\"threads_end\":" << threads_end << ",\"pool\":" << pool
      << ",\"extra_threads_started\":" << extra_started
      << ",\"events_seen\":" << (events_seen ? "true" : "false") << ",\"window_s\":" << window_s
      << ",\"delivered\":" << delivered
      << ",\"delivered_per_s\":" << (window_s > 0 ? static_cast<double>(delivered) / window_s : 0.0)
      << ",\"events_per_s_per_handler\":"
      << (window_s > 0 ? static_cast<double>(delivered) / window_s / static_cast<double>(counted)
                       : 0.0)
      << ",\"cpu_window_s\":" << cpu_window_s << ",\"cpu_us_per_notification\":"
      << (delivered > 0 ? cpu_window_s * 1e6 / static_cast<double>(delivered) : 0.0)
      << ",\"latency_samples\":" << latency.total()
      << ",\"latency_p50_us\":" << static_cast<double>(latency.quantile(0.50)) / 1e3
      << ",\"latency_p99_us\":" << static_cast<double>(latency.quantile(0.99)) / 1e3
      << ",\"latency_max_us\":" << static_cast<double>(latency.quantile(1.0)) / 1e3
      << ",\"e2e_p50_us\":" << static_cast<double>(end_to_end.quantile(0.50)) / 1e3
      << ",\"e2e_p99_us\":" << static_cast<double>(end_to_end.quantile(0.99)) / 1e3
      << ",\"source\":\"" << (synthetic ? "synthetic" : "server") << "\""
      << ",\"source_rate_asked\":" << (synthetic ? opt.rate : 0.0)
      << ",\"source_templates\":" << (synthetic ? synthetic->templates() : 0)
      << ",\"source_events\":" << source_events << ",\"source_events_per_s\":"
      << (window_s > 0 ? static_cast<double>(source_events) / window_s : 0.0)
      << ",\"steal_window_s\":" << steal_window_s
      << ",\"source_lateness_p50_us\":" << static_cast<double>(lateness.quantile(0.50)) / 1e3
      << ",\"source_lateness_p99_us\":" << static_cast<double>(lateness.quantile(0.99)) / 1e3
      << ",\"source_lateness_max_us\":" << static_cast<double>(lateness.quantile(1.0)) / 1e3;
  if (opt.stuck_phases != 0) {
    // Whether handler 0 did block (mode 1 only): a run where it did not measured nothing.
    out << ",\"stuck_handler_blocked\":" << (counters[0]->blocked_once ? "true" : "false")
        << ",\"phase_samples\":[" << phase_latency[0].total() << "," << phase_latency[1].total()
        << "," << phase_latency[2].total() << "]"
        << ",\"phase_p50_us\":" << phase_array(0.50) << ",\"phase_p99_us\":" << phase_array(0.99)
        << ",\"phase_max_us\":" << phase_array(1.0);
  }
  out << "}";
  std::cout << out.str() << std::endl;
  return synced ? 0 : 1;
}
