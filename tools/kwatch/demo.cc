// kwatch demo: many simulated mesh components, one InformerFactory, one server watch per resource.
// run_demo, at the end, reads as its steps: prepare_demo (setup), run_ticks (the loop, drawn by
// DemoScreen; the formatting is demo_report's), wait_for_convergence and settle_watch_counts (the
// verdict's inputs), demo_verdict (demo_report), clean_up.

#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <iostream>
#include <random>
#include <sstream>
#include <thread>

#include "commands.h"
#include "demo_report.h"
#include "kinformer/client/dynamic_object.h"
#include "kinformer/informer/informer_factory.h"
#include "watch_audit.h"

namespace kinformer::tools {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr std::array<const char*, 3> kRoles = {"sidecar-injector", "endpoint-publisher",
                                               "cert-distributor"};
constexpr std::size_t kResources = 3;

struct DemoResource {
  std::string label;  // column name
  client::ResourceType type;
  std::string audit_name;  // WatchCount::name()
};

const std::array<DemoResource, kResources>& demo_resources() {
  static const std::array<DemoResource, kResources> r = {
      DemoResource{"secrets", client::dynamic_resource({"", "v1", "secrets", "Secret", true}),
                   "secrets"},
      DemoResource{"pods", client::dynamic_resource({"", "v1", "pods", "Pod", true}), "pods"},
      DemoResource{"endpointslices",
                   client::dynamic_resource(
                       {"discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", true}),
                   "discovery.k8s.io/v1/endpointslices"},
  };
  return r;
}

std::shared_ptr<client::DynamicObject> make_object(const std::string& ns, const std::string& name,
                                                   std::string json) {
  auto o = std::make_shared<client::DynamicObject>();
  o->metadata.namespace_ = ns;
  o->metadata.name = name;
  o->json = std::move(json);
  return o;
}

std::string object_json(std::size_t resource, const std::string& ns, const std::string& name,
                        unsigned n) {
  const std::string meta = R"("metadata":{"name":")" + name + R"(","namespace":")" + ns +
                           R"(","labels":{"app":"kinformer-demo"}})";
  switch (resource) {
    case 0:
      return R"({"apiVersion":"v1","kind":"Secret",)" + meta +
             R"(,"type":"Opaque","data":{"token":"ZGVtbw=="}})";
    case 1:
      return R"({"apiVersion":"v1","kind":"Pod",)" + meta +
             R"(,"spec":{"automountServiceAccountToken":false,"containers":[{"name":"app","image":"example.invalid/app:1"}]}})";
    default:
      return R"({"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice",)" +
             meta.substr(0, meta.size() - 2) + R"(,"kubernetes.io/service-name":"demo-svc"}})" +
             R"(,"addressType":"IPv4","endpoints":[{"addresses":["10.0.)" +
             std::to_string((n / 250) % 250) + "." + std::to_string(n % 250 + 1) +
             R"("],"conditions":{"ready":true}}],"ports":[{"name":"http","port":8080,"protocol":"TCP"}]})";
  }
}

// Creates, relabels and deletes objects of the three resources at a fixed rate.
class Churn {
 public:
  Churn(client::RestClient& client, std::string ns, int ops_per_second)
      : client_(client), ns_(std::move(ns)), rate_(ops_per_second) {}

  void start() {
    thread_ = std::jthread([this](std::stop_token stop) { run(stop); });
  }
  void stop() {
    thread_.request_stop();
    if (thread_.joinable()) thread_.join();
  }
  std::uint64_t ops() const { return ops_.load(); }
  std::uint64_t errors() const { return errors_.load(); }
  /// Deletes every object it created that still exists; call after stop().
  std::size_t cleanup() {
    std::size_t deleted = 0;
    for (std::size_t r = 0; r < kResources; ++r) {
      for (const auto& name : live_[r]) {
        auto s = client_.delete_(demo_resources()[r].type, ns_, name);
        if (s || s.error().http_status == 404)
          ++deleted;
        else
          log("warn", "cleanup: delete failed",
              {{"resource", demo_resources()[r].label},
               {"name", name},
               {"error", s.error().to_string()}});
      }
      live_[r].clear();
    }
    return deleted;
  }

 private:
  void run(std::stop_token stop) {
    if (rate_ <= 0) return;
    const auto period = std::chrono::microseconds(1'000'000 / rate_);
    auto next = Clock::now();
    std::size_t r = 0;
    while (!stop.stop_requested()) {
      step(r);
      r = (r + 1) % kResources;
      next += period;
      std::mutex mu;
      std::unique_lock lock(mu);
      std::condition_variable_any cv;
      cv.wait_until(lock, stop, next, [] { return false; });
    }
  }

  void step(std::size_t r) {
    const auto& res = demo_resources()[r];
    auto& live = live_[r];
    const unsigned roll = rng_() % 100;
    client::Error error;
    bool ok = true;
    if (live.size() < 5 || (roll < 40 && live.size() < 30)) {
      const unsigned n = next_id_++;
      const std::string name =
          "demo-" + res.label.substr(0, res.label.size() - 1) + "-" + std::to_string(n);
      auto created =
          client_.create(res.type, *make_object(ns_, name, object_json(r, ns_, name, n)));
      if (created)
        live.push_back(name);
      else {
        ok = false;
        error = created.error();
      }
    } else if (roll < 75) {
      const std::string& name = live[rng_() % live.size()];
      auto patched = client_.patch(
          res.type, ns_, name, client::PatchType::merge,
          R"({"metadata":{"labels":{"demo-rev":")" + std::to_string(ops_.load()) + R"("}}})");
      if (!patched) {
        ok = false;
        error = patched.error();
      }
    } else {
      const std::size_t i = rng_() % live.size();
      auto deleted = client_.delete_(res.type, ns_, live[i]);
      if (deleted || deleted.error().http_status == 404)
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
      else {
        ok = false;
        error = deleted.error();
      }
    }
    ++ops_;
    if (!ok && errors_++ < 5)
      log("warn", "churn operation failed",
          {{"resource", res.label}, {"error", error.to_string()}});
  }

  client::RestClient& client_;
  const std::string ns_;
  const int rate_;
  std::mt19937 rng_{std::random_device{}()};
  unsigned next_id_ = 0;
  std::array<std::vector<std::string>, kResources> live_;  // churn thread only (then cleanup)
  std::atomic<std::uint64_t> ops_{0};
  std::atomic<std::uint64_t> errors_{0};
  std::jthread thread_;
};

// One simulated mesh component: a handler per resource that counts what it hears.
struct Component {
  std::string role;
  std::array<informer::SharedInformer*, kResources> informers{};
  std::array<std::shared_ptr<std::atomic<std::uint64_t>>, kResources> events;
  std::vector<informer::Registration> registrations;
};

// One demo run from setup to cleanup. Members go bottom-up: the components' registrations
// close before their factories, the factories before the client they list and watch through.
struct DemoRun {
  DemoOptions options;
  client::ClusterConfig config;
  std::unique_ptr<client::RestClient> client;
  WatchAudit baseline;         // the server's watches before any of ours
  std::string ns;              // the demo's namespace
  bool own_namespace = false;  // created by the demo, so deleted at the end
  std::vector<std::unique_ptr<informer::InformerFactory>> factories;  // one, or one per component
  std::vector<Component> components;
};

std::optional<WatchAudit> read_audit(client::RestClient& client) {
  auto r = client.get_raw("/metrics");
  if (!r || r->status != 200) return std::nullopt;
  try {
    auto audit = audit_watches(r->body);
    if (audit.source.empty()) return std::nullopt;
    return audit;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::string random_suffix() {
  std::random_device rd;
  std::ostringstream s;
  s << std::hex << (rd() & 0xfffff);
  return s.str();
}

ObjectVersions by_name(const std::vector<client::ObjectPtr>& objects) {
  ObjectVersions out;
  for (const auto& o : objects) out[o->metadata.name] = o->metadata.resource_version;
  return out;
}

const client::ResourceType& namespace_resource() {
  static const auto type = client::dynamic_resource({"", "v1", "namespaces", "Namespace", false});
  return type;
}

// ---------------------------------------------------------------------------------------------
// Setup

// The server's watches before anything of ours watches (its own clients hold watches too);
// nullopt after logging why /metrics cannot be read or counted.
std::optional<WatchAudit> read_baseline(client::RestClient& client, const std::string& server) {
  auto metrics = client.get_raw("/metrics");
  if (!metrics) {
    log("error", describe_error(metrics.error(), server));
    return std::nullopt;
  }
  if (metrics->status == 403) {
    log("error", "no permission to read /metrics (needs get on nonResourceURL /metrics)");
    return std::nullopt;
  }
  auto baseline = read_audit(client);
  if (!baseline) {
    log("error", "cannot count the server's watches from /metrics (HTTP " +
                     std::to_string(metrics->status) + ")");
  }
  return baseline;
}

// Creates run.ns (an existing one is used as it is) and its "default" ServiceAccount; false
// after logging why the namespace cannot be created.
bool create_namespace(DemoRun& run) {
  const std::string& ns = run.ns;
  auto created = run.client->create(
      namespace_resource(),
      *make_object(
          "", ns, R"({"apiVersion":"v1","kind":"Namespace","metadata":{"name":")" + ns + R"("}})"));
  if (created) {
    run.own_namespace = true;
  } else if (created.error().http_status != 409) {
    log("error", "cannot create namespace " + ns + ": " +
                     describe_error(created.error(), run.config.server));
    return false;
  }
  // Pods need the namespace's "default" ServiceAccount when the ServiceAccount admission plugin
  // is on; without kube-controller-manager nobody creates it. Already there (409) is fine.
  const auto sa = client::dynamic_resource({"", "v1", "serviceaccounts", "ServiceAccount", true});
  (void)run.client->create(
      sa,
      *make_object(
          ns, "default",
          R"({"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"default","namespace":")" +
              ns + R"("}})"));
  return true;
}

// Informers and handlers: the factories (one shared, or one per component), each component's
// counting handler on each resource's informer, then the factories started.
void start_components(DemoRun& run) {
  const auto& options = run.options;
  auto lister_watchers = [client = run.client.get()](const client::ResourceType& t,
                                                     const std::string& n) {
    return client->lister_watcher(t, n);
  };
  const std::size_t n_factories =
      options.unshared ? static_cast<std::size_t>(options.components) : 1;
  for (std::size_t i = 0; i < n_factories; ++i) {
    run.factories.push_back(std::make_unique<informer::InformerFactory>(lister_watchers));
  }

  run.components.resize(static_cast<std::size_t>(options.components));
  for (std::size_t i = 0; i < run.components.size(); ++i) {
    auto& c = run.components[i];
    c.role = kRoles[i % kRoles.size()];
    auto& factory = *run.factories[options.unshared ? i : 0];
    for (std::size_t r = 0; r < kResources; ++r) {
      c.events[r] = std::make_shared<std::atomic<std::uint64_t>>(0);
      c.informers[r] = &factory.informer(demo_resources()[r].type, {.namespace_ = run.ns});
      auto handler = std::make_shared<informer::ResourceEventHandlerFuncs>();
      handler->add = [e = c.events[r]](const client::ObjectPtr&, bool) { ++*e; };
      handler->update = [e = c.events[r]](const client::ObjectPtr&, const client::ObjectPtr&) {
        ++*e;
      };
      handler->del = [e = c.events[r]](const client::ObjectPtr&, bool) { ++*e; };
      c.registrations.push_back(c.informers[r]->add_handler(handler, {.name = c.role}));
    }
  }
  for (auto& f : run.factories) f->start();
}

// Setup: the client, the baseline, the namespace, then the started components; nullptr after
// logging why the server cannot run the demo.
std::unique_ptr<DemoRun> prepare_demo(const DemoOptions& options) {
  auto run = std::make_unique<DemoRun>();
  run->options = options;
  run->config = load_config(options.common);
  client::RestClientOptions client_options;
  client_options.user_agent = "kwatch-demo/0.1 (kinformer/0.1)";
  client_options.rate_limit.qps = 500;
  client_options.rate_limit.burst = 1000;
  run->client = std::make_unique<client::RestClient>(run->config, client_options);

  auto baseline = read_baseline(*run->client, run->config.server);
  if (!baseline) return nullptr;
  run->baseline = std::move(*baseline);

  // Namespace: ours unless --namespace names an existing one.
  run->ns = options.namespace_.empty() ? "kinformer-demo-" + random_suffix() : options.namespace_;
  if (!create_namespace(*run)) return nullptr;
  log("info", "demo starting",
      {{"namespace", run->ns},
       {"components", std::to_string(options.components)},
       {"mode", options.unshared ? "unshared" : "shared"},
       {"duration", std::to_string(options.duration_seconds) + "s"},
       {"server", run->config.server}});

  start_components(*run);
  return run;
}

// ---------------------------------------------------------------------------------------------
// The loop and rendering

// What the demo shows at `elapsed` seconds: handlers, objects and events per resource, and the
// server's watches over the baseline (-1 when /metrics cannot be read now).
DemoSnapshot take_snapshot(const DemoRun& run, long elapsed) {
  DemoSnapshot s;
  s.namespace_ = run.ns;
  s.unshared = run.options.unshared;
  s.components = run.components.size();
  s.elapsed_seconds = elapsed;
  s.duration_seconds = run.options.duration_seconds;
  for (const auto& f : run.factories) {
    for (const auto& [key, count] : f->handler_counts()) s.handlers += count;
  }
  const auto audit = read_audit(*run.client);
  for (std::size_t r = 0; r < kResources; ++r) {
    const auto& res = demo_resources()[r];
    DemoRow row;
    row.resource = res.label;
    row.objects = run.components.empty() ? 0 : run.components[0].informers[r]->store().size();
    for (const auto& c : run.components) row.events += c.events[r]->load();
    if (audit) {
      row.server_watches = audit->count(res.audit_name) - run.baseline.count(res.audit_name);
    }
    s.rows.push_back(row);
  }
  return s;
}

// Writes snapshots to stdout: on a terminal a table redrawn in place, otherwise one line per
// tick; the formatting itself is demo_report's.
class DemoScreen {
 public:
  explicit DemoScreen(const Churn& churn) : churn_(churn) {}

  // One tick's snapshot.
  void tick(const DemoSnapshot& s) {
    std::string text;
    if (tty_) {
      const auto table = format_demo_table(s, churn_.ops(), churn_.errors());
      text = erase_lines(drawn_) + table;
      drawn_ = static_cast<std::size_t>(std::count(table.begin(), table.end(), '\n'));
    } else {
      text = format_demo_tick(s) + "\n";
    }
    std::lock_guard lock(stdout_mutex());
    std::cout << text << std::flush;
  }

  // The final table (replacing the live one on a terminal) and the verdict line.
  void finish(const DemoSnapshot& s, const DemoVerdict& verdict) {
    std::lock_guard lock(stdout_mutex());
    std::cout << erase_lines(drawn_) << format_demo_table(s, churn_.ops(), churn_.errors());
    std::cout << verdict.line << '\n' << std::flush;
  }

 private:
  const Churn& churn_;
  const bool tty_ = isatty(STDOUT_FILENO) == 1;
  std::size_t drawn_ = 0;  // lines of the table on the terminal now
};

// Waits until `until`; true when SIGINT or SIGTERM came first (SIGUSR1 is taken and ignored).
bool interrupted_before(Clock::time_point until, const sigset_t& signals) {
  while (true) {
    const auto left = until - Clock::now();
    if (left <= 0s) return false;
    const auto ns_left = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
    timespec wait{static_cast<time_t>(ns_left / 1'000'000'000),
                  static_cast<long>(ns_left % 1'000'000'000)};
    const int sig = sigtimedwait(&signals, nullptr, &wait);
    if (sig == SIGINT || sig == SIGTERM) return true;
  }
}

// The loop: one snapshot drawn per second since `start` until --duration, or until a signal
// (whose tick is still drawn).
void run_ticks(const DemoRun& run, DemoScreen& screen, Clock::time_point start) {
  const sigset_t signals = kwatch_signals();
  bool interrupted = false;
  for (long tick = 1; tick <= run.options.duration_seconds && !interrupted; ++tick) {
    interrupted = interrupted_before(start + std::chrono::seconds(tick), signals);
    screen.tick(take_snapshot(run, tick));
  }
}

// ---------------------------------------------------------------------------------------------
// The verdict's inputs

// One convergence pass: per resource, the server's list against every factory's cache (name +
// resourceVersion); the divergence entries, empty when all match.
std::vector<std::string> diverged_resources(const DemoRun& run) {
  std::vector<std::string> diverged;
  for (const auto& res : demo_resources()) {
    auto listed = run.client->list_all(res.type, run.ns);
    if (!listed) {
      diverged.push_back(list_failed_divergence(res.label, listed.error().to_string()));
      continue;
    }
    std::vector<ObjectVersions> caches;
    for (const auto& f : run.factories) {
      caches.push_back(by_name(f->informer(res.type, {.namespace_ = run.ns}).store().list()));
    }
    if (auto d = cache_divergence(res.label, by_name(listed->items), caches)) {
      diverged.push_back(std::move(*d));
    }
  }
  return diverged;
}

// Convergence: repeats diverged_resources() until it is empty or 30 s passed; the last result.
std::vector<std::string> wait_for_convergence(const DemoRun& run) {
  const auto deadline = Clock::now() + 30s;
  while (true) {
    auto diverged = diverged_resources(run);
    if (diverged.empty() || Clock::now() >= deadline) return diverged;
    std::this_thread::sleep_for(250ms);  // polling interval
  }
}

// The server's count moves a little after connections open: snapshots until watches_settled()
// or 10 s passed; the last one, the verdict's.
DemoSnapshot settle_watch_counts(const DemoRun& run, Clock::time_point start) {
  const auto deadline = Clock::now() + 10s;
  while (true) {
    auto s = take_snapshot(
        run, std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - start).count());
    if (watches_settled(s) || Clock::now() >= deadline) return s;
    std::this_thread::sleep_for(250ms);  // polling interval
  }
}

// ---------------------------------------------------------------------------------------------
// Cleanup

// Closes every registration, shuts the factories down, deletes what churn created and the
// namespace if the demo created it.
void clean_up(DemoRun& run, Churn& churn) {
  run.components.clear();  // closes every registration
  for (auto& f : run.factories) f->shutdown();
  run.factories.clear();

  const std::size_t deleted = churn.cleanup();
  if (run.own_namespace) {
    auto s = run.client->delete_(namespace_resource(), "", run.ns);
    if (!s) {
      log("warn", "cleanup: deleting the namespace failed",
          {{"namespace", run.ns}, {"error", s.error().to_string()}});
    }
  }
  log("info", "cleaned up",
      {{"deleted", std::to_string(deleted)},
       {"namespace", run.ns},
       {"namespaceDeleted", run.own_namespace ? "true" : "false"}});
}

}  // namespace

// Setup, churn during the loop, convergence and settling, the verdict, cleanup.
int run_demo(const DemoOptions& options) {
  const auto run = prepare_demo(options);
  if (!run) return kExitError;
  Churn churn(*run->client, run->ns, options.ops_per_second);
  churn.start();
  DemoScreen screen(churn);
  const auto start = Clock::now();
  run_ticks(*run, screen, start);
  churn.stop();
  log("info", "churn stopped; waiting for the caches to converge",
      {{"ops", std::to_string(churn.ops())}, {"errors", std::to_string(churn.errors())}});

  const std::vector<std::string> diverged = wait_for_convergence(*run);
  const DemoSnapshot final_snapshot = settle_watch_counts(*run, start);
  const DemoVerdict verdict = demo_verdict(final_snapshot, diverged);
  screen.finish(final_snapshot, verdict);
  clean_up(*run, churn);
  return verdict.exit_code;
}

}  // namespace kinformer::tools
