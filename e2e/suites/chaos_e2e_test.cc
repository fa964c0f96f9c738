// The chaos suite: informers of one InformerFactory reach a real API server through a TcpProxy
// whose seeded schedule cuts, stalls, truncates (mid-event), delays, resets and silences (held
// open for good, no byte either way) their connections, while a second client, connected directly,
// churns Pods, Secrets and EndpointSlices in several namespaces (creates, updates, relabels that
// move objects in and out of label selectors, deletes, the deletion of a whole namespace), and —
// with the embedded launcher — the API server is restarted and etcd compacted at random points.
//
// Then quiescence: faults stop, the proxy heals (a silent connection stays silent: the client
// finds it at its watch idle deadline, 75 s, or request deadline, 30 s), the churn stops, and
// the test polls (with a deadline) until every informer's cache equals the server's list by uid and
// resourceVersion in both directions, and every handler's view, built only from its own callbacks,
// equals its informer's cache. Handlers also check each callback against what they heard before (an
// add of a key they hold, an update from a state they never saw, a delete of a key they do not hold
// are anomalies). Differences and anomalies must be zero.
//
// Environment:
//   KINFORMER_CHAOS_SEED      the seed (decimal); unset: random. Printed either way.
//   KINFORMER_CHAOS_DURATION  churn time: "45s" (default), "30m", "2h", or seconds.
// tools/scripts/chaos.sh runs it alone (e.g. --duration 30m); the README's test command runs
// the short default through `ctest -L e2e`.
//
// Without the launcher (kind), restarts and compactions are skipped, and a printed line says so;
// the proxy faults and the churn still run.
//
// The factory's backoff cap is 5 s instead of 30 s, so that quiescence comes within seconds of
// the last fault rather than after a minute of backoff; backoff itself has its unit tests.

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "e2e_env.h"
#include "kinformer/informer/informer_factory.h"
#include "tcp_proxy.h"

namespace kinformer::e2e {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using informer::InformerFactory;
using informer::Registration;
using informer::SharedInformer;

// ---- configuration ------------------------------------------------------------------------

std::uint64_t chaos_seed() {
  if (const char* s = std::getenv("KINFORMER_CHAOS_SEED"); s != nullptr && *s != '\0') {
    char* end = nullptr;
    const auto v = std::strtoull(s, &end, 10);
    if (end == s || *end != '\0')
      throw std::runtime_error(
          std::string("KINFORMER_CHAOS_SEED: expected a decimal number, got '") + s + "'");
    return v;
  }
  std::random_device rd;
  return (std::uint64_t{rd()} << 32) ^ rd();
}

// "45s", "30m", "2h", "90" (seconds).
std::chrono::seconds chaos_duration() {
  const char* s = std::getenv("KINFORMER_CHAOS_DURATION");
  if (s == nullptr || *s == '\0') return 45s;
  const std::string text = s;
  char* end = nullptr;
  const long n = std::strtol(text.c_str(), &end, 10);
  const std::string unit = end;
  if (end == text.c_str() || n <= 0 || (unit != "" && unit != "s" && unit != "m" && unit != "h"))
    throw std::runtime_error("KINFORMER_CHAOS_DURATION: expected e.g. 45s, 30m or 2h, got '" +
                             text + "'");
  return std::chrono::seconds(n * (unit == "m" ? 60 : unit == "h" ? 3600 : 1));
}

// ---- what is compared ---------------------------------------------------------------------

struct Version {
  std::string uid;
  std::string resource_version;
  bool operator==(const Version&) const = default;
};
// Object key ("namespace/name") -> its uid and resourceVersion.
using View = std::map<std::string, Version>;

Version version_of(const client::Object& o) {
  return {o.metadata.uid.str(), o.metadata.resource_version};
}

View view_of(const std::vector<client::ObjectPtr>& objects) {
  View v;
  for (const auto& o : objects) v[o->key()] = version_of(*o);
  return v;
}

// Differences between `left` and `right`, one line per key, both directions.
std::vector<std::string> differences(const View& left, const char* left_name, const View& right,
                                     const char* right_name) {
  std::vector<std::string> out;
  auto show = [](const Version& v) { return "uid=" + v.uid + " rv=" + v.resource_version; };
  for (const auto& [key, v] : left) {
    auto it = right.find(key);
    if (it == right.end()) {
      out.push_back(key + ": only in " + left_name + " (" + show(v) + ")");
    } else if (it->second != v) {
      out.push_back(key + ": " + left_name + " " + show(v) + ", " + right_name + " " +
                    show(it->second));
    }
  }
  for (const auto& [key, v] : right) {
    if (!left.contains(key)) out.push_back(key + ": only in " + right_name + " (" + show(v) + ")");
  }
  return out;
}

// A handler's own view of its informer, built only from its callbacks. Each callback is also
// checked against what this handler heard before; a mismatch is an anomaly (a lost, duplicated
// or reordered notification).
class ViewHandler final : public informer::ResourceEventHandler {
 public:
  void on_add(const client::ObjectPtr& o, bool) override {
    std::lock_guard lock(mu_);
    ++adds_;
    if (view_.contains(o->key())) anomaly("add of a key it holds", *o);
    view_[o->key()] = version_of(*o);
  }
  void on_update(const client::ObjectPtr& old_object, const client::ObjectPtr& o) override {
    std::lock_guard lock(mu_);
    ++updates_;
    auto it = view_.find(o->key());
    if (it == view_.end()) {
      anomaly("update of a key it does not hold", *o);
    } else if (it->second != version_of(*old_object)) {
      anomaly("update from rv=" + old_object->metadata.resource_version +
                  ", it holds rv=" + it->second.resource_version,
              *o);
    }
    view_[o->key()] = version_of(*o);
  }
  void on_delete(const client::ObjectPtr& o, bool final_state_unknown) override {
    std::lock_guard lock(mu_);
    ++deletes_;
    if (final_state_unknown) ++tombstones_;
    if (view_.erase(o->key()) == 0) anomaly("delete of a key it does not hold", *o);
  }

  View view() const {
    std::lock_guard lock(mu_);
    return view_;
  }
  std::vector<std::string> anomalies() const {
    std::lock_guard lock(mu_);
    return anomalies_;
  }
  struct Counts {
    std::uint64_t adds, updates, deletes, tombstones;
  };
  Counts counts() const {
    std::lock_guard lock(mu_);
    return {adds_, updates_, deletes_, tombstones_};
  }

 private:
  void anomaly(const std::string& what, const client::Object& o) {  // mu_ held
    anomalies_.push_back(o.key() + ": " + what);
  }
  mutable std::mutex mu_;
  View view_;                                                            // guarded by mu_
  std::vector<std::string> anomalies_;                                   // guarded by mu_
  std::uint64_t adds_ = 0, updates_ = 0, deletes_ = 0, tombstones_ = 0;  // guarded by mu_
};

// ---- a trace of what each informer asked and got ----------------------------------------

// The last requests and events of each (resource, namespace, label selector), to tell on a
// failure what a diverging informer last did. Keys and resourceVersions only, never contents.
class Trace {
 public:
  void add(const std::string& key, std::string line) {
    const double t = std::chrono::duration<double>(Clock::now() - start_).count();
    char at[32];
    std::snprintf(at, sizeof at, "t=%.2fs ", t);
    std::lock_guard lock(mu_);
    auto& lines = lines_[key];
    lines.push_back(at + std::move(line));
    if (lines.size() > 40) lines.erase(lines.begin());
  }
  std::vector<std::string> lines(const std::string& key) const {
    std::lock_guard lock(mu_);
    auto it = lines_.find(key);
    return it == lines_.end() ? std::vector<std::string>{} : it->second;
  }

 private:
  const Clock::time_point start_ = Clock::now();
  mutable std::mutex mu_;
  std::map<std::string, std::vector<std::string>> lines_;  // guarded by mu_
};

std::string trace_key(const client::ResourceType& type, const std::string& ns,
                      const std::string& selector) {
  return type.gvr.resource + "/" + (ns.empty() ? "*" : ns) + "/" + selector;
}

class TracedWatch final : public client::WatchStream {
 public:
  TracedWatch(client::WatchStreamPtr inner, Trace& trace, std::string key)
      : inner_(std::move(inner)), trace_(trace), key_(std::move(key)) {}
  client::Result<std::optional<client::WatchEvent>> next() override {
    auto r = inner_->next();
    if (!r) {
      trace_.add(key_, "watch error: " + r.error().to_string());
    } else if (!*r) {
      trace_.add(key_, "watch ended cleanly");
    } else {
      static constexpr const char* kTypes[] = {"ADDED", "MODIFIED", "DELETED", "BOOKMARK"};
      const auto& e = **r;
      trace_.add(key_, std::string(kTypes[static_cast<int>(e.type)]) + " " + e.object->key() +
                           " rv=" + e.object->metadata.resource_version);
    }
    return r;
  }
  void cancel() override { inner_->cancel(); }
  [[nodiscard]] std::size_t buffered() const override { return inner_->buffered(); }
  void set_idle_timeout(std::chrono::milliseconds timeout) override {
    inner_->set_idle_timeout(timeout);
  }

 private:
  client::WatchStreamPtr inner_;
  Trace& trace_;
  const std::string key_;
};

class TracedListerWatcher final : public client::ListerWatcher {
 public:
  TracedListerWatcher(client::ListerWatcherPtr inner, Trace& trace,
                      const client::ResourceType& type, std::string ns)
      : inner_(std::move(inner)), trace_(trace), type_(type), ns_(std::move(ns)) {}
  client::Result<client::ObjectList> list(const client::ListOptions& o) override {
    const auto key = trace_key(type_, ns_, o.label_selector);
    auto r = inner_->list(o);
    trace_.add(key, "list rv=" + o.resource_version.value_or("<unset>") +
                        " match=" + o.resource_version_match +
                        (r ? " -> items=" + std::to_string(r->items.size()) + " rv=" +
                                 r->resource_version + (r->continue_token.empty() ? "" : " (more)")
                           : " -> " + r.error().to_string()));
    return r;
  }
  client::Result<client::WatchStreamPtr> watch(const client::ListOptions& o) override {
    const auto key = trace_key(type_, ns_, o.label_selector);
    auto r = inner_->watch(o);
    trace_.add(key, "watch rv=" + o.resource_version.value_or("<unset>") +
                        (o.send_initial_events ? " sendInitialEvents" : "") +
                        (r ? std::string(" -> open") : " -> " + r.error().to_string()));
    if (!r) return r;
    return client::WatchStreamPtr(std::make_unique<TracedWatch>(std::move(r).value(), trace_, key));
  }

 private:
  client::ListerWatcherPtr inner_;
  Trace& trace_;
  const client::ResourceType& type_;
  const std::string ns_;
};

// ---- the objects churned ------------------------------------------------------------------

enum class Kind { pod, secret, slice };
constexpr std::array<Kind, 3> kKinds = {Kind::pod, Kind::secret, Kind::slice};

const client::ResourceType& type_of(Kind k) {
  switch (k) {
    case Kind::pod:
      return pods();
    case Kind::secret:
      return secrets();
    case Kind::slice:
      return endpoint_slices();
  }
  return pods();
}

std::string labels_json(const std::string& run, const std::string& tier) {
  return R"("labels":{"chaos":")" + run + R"(","tier":")" + tier +
         R"(","kubernetes.io/service-name":"svc"})";
}

std::string manifest(Kind k, const std::string& ns, const std::string& name, const std::string& run,
                     const std::string& tier, unsigned n) {
  const std::string meta = R"("metadata":{"name":")" + name + R"(","namespace":")" + ns + R"(",)" +
                           labels_json(run, tier) + "}";
  switch (k) {
    case Kind::pod:
      return R"({"apiVersion":"v1","kind":"Pod",)" + meta +
             R"(,"spec":{"containers":[{"name":"c","image":"registry.k8s.io/pause:3.10"}]}})";
    case Kind::secret:
      return R"({"apiVersion":"v1","kind":"Secret",)" + meta + R"(,"stringData":{"k":")" +
             std::to_string(n) + R"("}})";
    case Kind::slice:
      return R"({"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice",)" + meta +
             R"(,"addressType":"IPv4","endpoints":[{"addresses":["10.3.)" +
             std::to_string(n % 250) +
             R"(.1"],"conditions":{"ready":true}}],"ports":[{"name":"http","port":8080,"protocol":"TCP"}]})";
  }
  return {};
}

// A change that is not a relabel: an annotation, the Secret's data, the slice's endpoints.
std::string update_patch(Kind k, unsigned n) {
  switch (k) {
    case Kind::pod:
      return R"({"metadata":{"annotations":{"chaos/gen":")" + std::to_string(n) + R"("}}})";
    case Kind::secret:
      return R"({"stringData":{"k":")" + std::to_string(n) + R"("}})";
    case Kind::slice:
      return R"({"endpoints":[{"addresses":["10.4.)" + std::to_string(n % 250) +
             R"(.2"],"conditions":{"ready":)" + (n % 2 == 0 ? "true" : "false") + "}}]}";
  }
  return {};
}

struct ChurnStats {
  std::atomic<std::uint64_t> creates{0}, updates{0}, relabels{0}, deletes{0}, failed{0};
  std::atomic<std::uint64_t> namespaces_created{0}, namespaces_deleted{0};
};

// The second client's churn. Namespaces: `a` and `b` all along, `doomed` until it is deleted
// (at 55% of the run; then its objects are deleted as the namespace controller would, which the
// embedded launcher does not run), `late` from 30% of the run. Every object carries the run's
// label (chaos=<run>) and tier=web|db; relabels flip the tier.
class Churn {
 public:
  Churn(client::RestClient& client, std::string run, std::vector<std::string> namespaces,
        std::string doomed, std::uint64_t seed, std::chrono::seconds duration)
      : client_(client),
        run_(std::move(run)),
        active_(std::move(namespaces)),
        doomed_(std::move(doomed)),
        rng_(seed),
        duration_(duration) {}

  void run(const std::atomic<bool>& stop) {
    const auto start = Clock::now();
    bool late_created = false, doomed_deleted = false;
    unsigned n = 0;
    while (!stop) {
      const auto elapsed = Clock::now() - start;
      if (!late_created && elapsed >= duration_ * 3 / 10) {
        late_created = true;
        if (auto ns = create_late_namespace(stop)) active_.push_back(*ns);
      }
      if (!doomed_deleted && elapsed >= duration_ * 55 / 100) {
        doomed_deleted = true;
        delete_namespace(doomed_, stop);
      }
      step(++n);
      // The schedule of the churn (a few dozen operations a second), not a wait for a condition.
      std::this_thread::sleep_for(
          std::chrono::milliseconds(std::uniform_int_distribution<int>(2, 30)(rng_)));
    }
  }

  const ChurnStats& stats() const { return stats_; }

 private:
  void step(unsigned n) {
    const Kind kind = kKinds[pick(kKinds.size())];
    const std::string& ns = active_[pick(active_.size())];
    const std::string name = std::string(kind == Kind::pod      ? "pod-"
                                         : kind == Kind::secret ? "secret-"
                                                                : "slice-") +
                             std::to_string(pick(12));
    const std::string tier = pick(2) == 0 ? "web" : "db";
    const auto& type = type_of(kind);
    const unsigned op = static_cast<unsigned>(pick(100));
    bool ok = false;
    if (op < 35) {
      auto r = client_.create(type, *object(ns, name, manifest(kind, ns, name, run_, tier, n)));
      ok = r.ok() || r.error().http_status == 409;
      if (r.ok()) ++stats_.creates;
    } else if (op < 60) {
      auto r = client_.patch(type, ns, name, client::PatchType::merge, update_patch(kind, n));
      ok = r.ok() || r.error().http_status == 404;
      if (r.ok()) ++stats_.updates;
    } else if (op < 80) {
      auto r = client_.patch(type, ns, name, client::PatchType::merge,
                             R"({"metadata":{"labels":{"tier":")" + tier + R"("}}})");
      ok = r.ok() || r.error().http_status == 404;
      if (r.ok()) ++stats_.relabels;
    } else {
      auto r = client_.delete_(type, ns, name);
      ok = r.ok() || r.error().http_status == 404;
      if (r.ok()) ++stats_.deletes;
    }
    if (!ok) {
      ++stats_.failed;  // the server is restarting: the next operations will tell
      std::this_thread::sleep_for(100ms);
    }
  }

  std::size_t pick(std::size_t n) {
    return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng_);
  }

  // Retries `step` until it succeeds or the churn stops (across an API server restart).
  bool retry(const std::atomic<bool>& stop, const std::function<bool()>& step) {
    while (!stop) {
      if (step()) return true;
      std::this_thread::sleep_for(200ms);  // the server is down: try again
    }
    return false;
  }

  std::optional<std::string> create_late_namespace(const std::atomic<bool>& stop) {
    std::string name;
    if (!retry(stop, [&] {
          try {
            name = create_namespace(client_, "chaos-late");
            return true;
          } catch (const std::exception&) {
            return false;
          }
        }))
      return std::nullopt;
    ++stats_.namespaces_created;
    std::fprintf(stderr, "chaos: churn created namespace %s\n", name.c_str());
    return name;
  }

  void delete_namespace(const std::string& ns, const std::atomic<bool>& stop) {
    std::erase(active_, ns);
    if (!retry(stop, [&] {
          auto r = client_.delete_(namespaces(), "", ns);
          return r.ok() || r.error().http_status == 404;
        }))
      return;
    ++stats_.namespaces_deleted;
    std::fprintf(stderr, "chaos: churn deleted namespace %s; deleting its objects\n", ns.c_str());
    for (Kind k : kKinds) {
      retry(stop, [&] {
        auto listed = client_.list_all(type_of(k), ns);
        if (!listed) return false;
        for (const auto& o : listed->items) {
          auto r = client_.delete_(type_of(k), ns, o->metadata.name);
          if (!r.ok() && r.error().http_status != 404) return false;
          ++stats_.deletes;
        }
        return true;
      });
    }
  }

  client::RestClient& client_;
  const std::string run_;
  std::vector<std::string> active_;
  const std::string doomed_;
  std::mt19937_64 rng_;
  const std::chrono::seconds duration_;
  ChurnStats stats_;
};

// ---- the informers ------------------------------------------------------------------------

struct Watched {
  SharedInformer* informer;
  const client::ResourceType* type;
  std::string ns;
  std::string label_selector;
  std::vector<std::shared_ptr<ViewHandler>> handlers;
};

struct Launcher {
  std::uint64_t restarts = 0, compactions = 0, failures = 0;
};

TEST(ChaosE2E, CachesAndHandlerViewsEqualTheServerAfterFaultsRestartsAndCompactionsUnderChurn) {
  const std::uint64_t seed = chaos_seed();
  const auto duration = chaos_duration();
  const bool with_launcher = launcher_available();
  std::printf("chaos: seed=%" PRIu64 " duration=%llds (rerun: KINFORMER_CHAOS_SEED=%" PRIu64 ")\n",
              seed, static_cast<long long>(duration.count()), seed);
  if (!with_launcher)
    std::printf(
        "chaos: skipped: API server restarts and etcd compactions (no embedded launcher: "
        "KINFORMER_E2E_DIR/KINFORMER_E2E_LAUNCHED unset); proxy faults and churn still run\n");
  std::fflush(stdout);
  std::mt19937_64 seeds(seed);
  const std::uint64_t proxy_seed = seeds(), churn_seed = seeds(), launcher_seed = seeds();

  client::RestClient admin(admin_config(), fast_client_options());
  const std::string ns_a = create_namespace(admin, "chaos-a");
  const std::string ns_b = create_namespace(admin, "chaos-b");
  const std::string ns_doomed = create_namespace(admin, "chaos-doomed");
  const std::string run = ns_a;  // unique on this cluster: the label value of this run's objects

  // The clients under test reach the server through the proxy, with default options.
  TcpProxy proxy(admin_config().server);
  client::RestClient client(through(proxy, admin_config()));

  informer::FactoryOptions factory_options;
  factory_options.reflector.backoff.max = 5s;
  Trace trace;
  InformerFactory factory(
      [&client, &trace](const client::ResourceType& type,
                        const std::string& ns) -> client::ListerWatcherPtr {
        return std::make_unique<TracedListerWatcher>(client.lister_watcher(type, ns), trace, type,
                                                     ns);
      },
      factory_options);
  std::vector<Watched> watched;
  auto watch = [&](const client::ResourceType& type, const std::string& ns,
                   const std::string& selector, bool watch_list = false) {
    auto& inf = factory.informer(
        type, {.namespace_ = ns, .label_selector = selector, .use_watch_list = watch_list});
    watched.push_back({&inf, &type, ns, selector, {}});
  };
  const std::string this_run = "chaos=" + run;
  watch(pods(), ns_a, "", /*watch_list=*/true);
  watch(pods(), ns_b, "");
  watch(pods(), "", this_run + ",tier=web");  // objects enter and leave it as they are relabelled
  watch(secrets(), ns_a, "");
  watch(secrets(), ns_b, "tier=web");
  watch(secrets(), ns_doomed, "");
  watch(secrets(), "", this_run, /*watch_list=*/true);
  watch(endpoint_slices(), ns_b, "");
  watch(endpoint_slices(), ns_doomed, "");
  watch(endpoint_slices(), "", this_run + ",tier=db");

  std::vector<Registration> registrations;
  auto add_view_handler = [&](Watched& w, const std::string& name) {
    w.handlers.push_back(std::make_shared<ViewHandler>());
    registrations.push_back(w.informer->add_handler(w.handlers.back(), {.name = name}));
  };
  for (auto& w : watched) add_view_handler(w, "view");
  factory.start();
  ASSERT_TRUE(factory.wait_for_cache_sync(60s)) << "the informers did not sync through the proxy";

  // The faults, the churn, and the launcher's restarts and compactions run together.
  FaultSchedule schedule;
  schedule.seed = proxy_seed;
  schedule.log = [](const std::string& line) { std::fprintf(stderr, "chaos: %s\n", line.c_str()); };
  proxy.start_faults(schedule);

  Churn churn(admin, run, {ns_a, ns_b, ns_doomed}, ns_doomed, churn_seed, duration);
  std::atomic<bool> stop_churn{false};
  std::thread churn_thread([&] { churn.run(stop_churn); });

  // The timeline of the main thread: a second handler on every informer at 25% (it gets
  // synthetic adds under churn), and with the launcher one restart and one compaction in a
  // random order, plus one more of either per further 30 s, at random points in [10%, 85%].
  struct Event {
    std::chrono::milliseconds at;
    enum { late_handlers, restart, compact } what;
  };
  std::mt19937_64 launcher_rng(launcher_seed);
  const auto total_ms = std::chrono::duration_cast<std::chrono::milliseconds>(duration);
  std::vector<Event> timeline = {{total_ms / 4, Event::late_handlers}};
  if (with_launcher) {
    std::uniform_int_distribution<long long> when(total_ms.count() / 10,
                                                  total_ms.count() * 85 / 100);
    const bool restart_first = launcher_rng() % 2 == 0;
    timeline.push_back({std::chrono::milliseconds(when(launcher_rng)),
                        restart_first ? Event::restart : Event::compact});
    timeline.push_back({std::chrono::milliseconds(when(launcher_rng)),
                        restart_first ? Event::compact : Event::restart});
    for (auto extra = duration / 30s; extra > 1; --extra) {
      timeline.push_back({std::chrono::milliseconds(when(launcher_rng)),
                          launcher_rng() % 2 == 0 ? Event::restart : Event::compact});
    }
  }
  std::sort(timeline.begin(), timeline.end(),
            [](const Event& x, const Event& y) { return x.at < y.at; });
  Launcher launched;
  const auto started = Clock::now();
  for (const auto& e : timeline) {
    std::this_thread::sleep_until(started + e.at);  // the schedule itself
    const double at = std::chrono::duration<double>(Clock::now() - started).count();
    if (e.what == Event::late_handlers) {
      std::fprintf(stderr, "chaos: t=%.1fs a second handler on every informer\n", at);
      for (auto& w : watched) add_view_handler(w, "late-view");
      continue;
    }
    const char* command = e.what == Event::restart ? "restart-apiserver" : "compact";
    std::fprintf(stderr, "chaos: t=%.1fs launcher %s\n", at, command);
    const int rc = launcher(command);
    EXPECT_EQ(rc, 0) << "launcher " << command;
    if (rc != 0) ++launched.failures;
    ++(e.what == Event::restart ? launched.restarts : launched.compactions);
  }
  std::this_thread::sleep_until(started + duration);
  stop_churn = true;
  churn_thread.join();
  const auto churned = Clock::now() - started;

  // Quiescence: no more faults, the link healed, nothing changes on the server any more.
  proxy.stop_faults();
  proxy.heal();
  const auto quiet = Clock::now();
  std::vector<std::string> diffs;
  std::size_t compared_cache = 0, compared_handlers = 0;
  auto compare = [&] {
    diffs.clear();
    compared_cache = compared_handlers = 0;
    for (const auto& w : watched) {
      client::ListOptions options;
      options.label_selector = w.label_selector;
      auto listed = admin.list_all(*w.type, w.ns, options);
      if (!listed) {
        diffs.push_back(w.informer->key().to_string() +
                        ": server list failed: " + listed.error().to_string());
        continue;
      }
      const View server = view_of(listed->items);
      const View cache = view_of(w.informer->store().list());
      for (auto& d : differences(cache, "cache", server, "server"))
        diffs.push_back(w.informer->key().to_string() + " " + d);
      compared_cache += server.size();
      for (std::size_t i = 0; i < w.handlers.size(); ++i) {
        const View heard = w.handlers[i]->view();
        for (auto& d : differences(heard, "handler", cache, "cache"))
          diffs.push_back(w.informer->key().to_string() + " handler " + std::to_string(i) + " " +
                          d);
        compared_handlers += cache.size();
      }
    }
    return diffs.empty();
  };
  const bool converged = eventually(compare, 120s);
  const auto settle = Clock::now() - quiet;

  // The figures of the run.
  std::uint64_t relists = 0, watches = 0, expired = 0, errors = 0, adds = 0, updates = 0,
                deletes = 0, tombstones = 0;
  std::vector<std::string> anomalies;
  std::printf("chaos: %-72s %7s %7s %7s %7s\n", "informer", "objects", "relists", "watches",
              "deletes");
  for (const auto& w : watched) {
    auto& m = w.informer->metrics();
    const auto r = static_cast<std::uint64_t>(m.relists.value());
    const auto s = static_cast<std::uint64_t>(m.watch_starts.value());
    relists += r;
    watches += s;
    expired += static_cast<std::uint64_t>(m.restarts_expired.value());
    errors += static_cast<std::uint64_t>(m.restarts_error.value());
    std::uint64_t heard_deletes = 0;
    for (const auto& h : w.handlers) {
      const auto c = h->counts();
      adds += c.adds;
      updates += c.updates;
      deletes += c.deletes;
      tombstones += c.tombstones;
      heard_deletes += c.deletes;
      for (auto& a : h->anomalies()) anomalies.push_back(w.informer->key().to_string() + " " + a);
    }
    std::printf("chaos: %-72s %7zu %7" PRIu64 " %7" PRIu64 " %7" PRIu64 "\n",
                w.informer->key().to_string().c_str(), w.informer->store().list().size(), r, s,
                heard_deletes);
  }
  const std::uint64_t rewatches = watches - std::min<std::uint64_t>(watches, watched.size());
  const auto& cs = churn.stats();
  std::printf("chaos: seed=%" PRIu64 " churn=%.0fs settled_in=%.1fs\n", seed,
              std::chrono::duration<double>(churned).count(),
              std::chrono::duration<double>(settle).count());
  std::printf("chaos: faults total=%" PRIu64, proxy.faults_total());
  for (Fault f : kAllFaults) std::printf(" %s=%" PRIu64, to_string(f), proxy.faults(f));
  std::printf(" (proxy connections=%" PRIu64 ")\n", proxy.connections());
  if (with_launcher) {
    std::printf("chaos: restarts=%" PRIu64 " compactions=%" PRIu64 "\n", launched.restarts,
                launched.compactions);
  } else {
    std::printf("chaos: restarts=skipped compactions=skipped (no embedded launcher)\n");
  }
  std::printf("chaos: churn creates=%" PRIu64 " updates=%" PRIu64 " relabels=%" PRIu64
              " deletes=%" PRIu64 " failed=%" PRIu64 " namespaces created=%" PRIu64
              " deleted=%" PRIu64 "\n",
              cs.creates.load(), cs.updates.load(), cs.relabels.load(), cs.deletes.load(),
              cs.failed.load(), cs.namespaces_created.load(), cs.namespaces_deleted.load());
  std::printf("chaos: informers=%zu handlers=%zu relists=%" PRIu64 " rewatches=%" PRIu64
              " (watch ends: expired=%" PRIu64 " error=%" PRIu64 ")\n",
              watched.size(), registrations.size(), relists, rewatches, expired, errors);
  std::printf("chaos: handlers heard adds=%" PRIu64 " updates=%" PRIu64 " deletes=%" PRIu64
              " (tombstones=%" PRIu64 ")\n",
              adds, updates, deletes, tombstones);
  std::printf(
      "chaos: objects compared=%zu (cache vs server) + %zu (handler views vs cache); "
      "differences=%zu "
      "anomalies=%zu\n",
      compared_cache, compared_handlers, diffs.size(), anomalies.size());
  for (std::size_t i = 0; i < diffs.size() && i < 50; ++i)
    std::printf("chaos: difference: %s\n", diffs[i].c_str());
  for (std::size_t i = 0; i < anomalies.size() && i < 50; ++i)
    std::printf("chaos: anomaly: %s\n", anomalies[i].c_str());
  if (!converged) {
    // What each informer was doing, and what the proxy still holds open.
    for (const auto& w : watched) {
      auto& m = w.informer->metrics();
      std::printf(
          "chaos: state %s open_watches=%.0f watch_starts=%.0f ends timeout=%.0f expired=%.0f "
          "error=%.0f "
          "lists initial=%.0f relist=%.0f events added=%.0f modified=%.0f deleted=%.0f "
          "bookmarks=%.0f "
          "backoff_waits=%.0f budget_denials=%.0f last_rv=%s\n",
          w.informer->key().to_string().c_str(), m.open_watches.value(), m.watch_starts.value(),
          m.restarts_timeout.value(), m.restarts_expired.value(), m.restarts_error.value(),
          m.initial_lists.value(), m.relists.value(), m.events_added.value(),
          m.events_modified.value(), m.events_deleted.value(), m.events_bookmark.value(),
          m.backoff_waits.value(), m.budget_denials.value(),
          w.informer->last_sync_resource_version().c_str());
    }
    for (const auto& line : proxy.describe_connections())
      std::printf("chaos: proxy %s\n", line.c_str());
    for (const auto& w : watched) {
      const auto key = w.informer->key().to_string();
      if (!std::any_of(diffs.begin(), diffs.end(),
                       [&](const std::string& d) { return d.starts_with(key + " "); }))
        continue;
      for (const auto& line :
           trace.lines(trace_key(*w.type, w.ns, w.informer->key().label_selector)))
        std::printf("chaos: trace %s %s\n", key.c_str(), line.c_str());
    }
  }
  std::fflush(stdout);

  EXPECT_TRUE(converged) << diffs.size() << " differences 120 s after quiescence (seed " << seed
                         << ")";
  EXPECT_EQ(diffs.size(), 0u);
  EXPECT_EQ(anomalies.size(), 0u) << "handlers heard callbacks inconsistent with their own past";
  // The run must have been a chaos run, not a quiet one.
  EXPECT_GT(proxy.faults_total(), 0u);
  EXPECT_GT(relists + rewatches, 0u) << "no fault reached an informer";
  EXPECT_GT(cs.creates + cs.updates + cs.relabels + cs.deletes, 50u) << "the churn hardly ran";
  EXPECT_EQ(cs.namespaces_deleted.load(), 1u);
  EXPECT_GT(compared_cache, 0u);
  if (with_launcher) {
    EXPECT_GE(launched.restarts, 1u);
    EXPECT_GE(launched.compactions, 1u);
    EXPECT_EQ(launched.failures, 0u);
  }
  registrations.clear();
  factory.shutdown();
}

}  // namespace
}  // namespace kinformer::e2e
