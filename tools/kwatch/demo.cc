// kwatch demo: many simulated mesh components, one InformerFactory, one server watch per resource.

#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <iostream>
#include <map>
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

std::map<std::string, std::string> by_name(const std::vector<client::ObjectPtr>& objects) {
  std::map<std::string, std::string> out;
  for (const auto& o : objects) out[o->metadata.name] = o->metadata.resource_version;
  return out;
}

}  // namespace

int run_demo(const DemoOptions& options) {
  const auto config = load_config(options.common);
  client::RestClientOptions client_options;
  client_options.user_agent = "kwatch-demo/0.1 (kinformer/0.1)";
  client_options.rate_limit.qps = 500;
  client_options.rate_limit.burst = 1000;
  client::RestClient client(config, client_options);
  const auto& resources = demo_resources();

  // Baseline before anything of ours watches: the server's own clients hold watches too.
  auto metrics = client.get_raw("/metrics");
  if (!metrics) {
    log("error", describe_error(metrics.error(), config.server));
    return kExitError;
  }
  if (metrics->status == 403) {
    log("error", "no permission to read /metrics (needs get on nonResourceURL /metrics)");
    return kExitError;
  }
  auto baseline = read_audit(client);
  if (!baseline) {
    log("error", "cannot count the server's watches from /metrics (HTTP " +
                     std::to_string(metrics->status) + ")");
    return kExitError;
  }

  // Namespace: ours unless --namespace names an existing one.
  const std::string ns =
      options.namespace_.empty() ? "kinformer-demo-" + random_suffix() : options.namespace_;
  const auto namespaces = client::dynamic_resource({"", "v1", "namespaces", "Namespace", false});
  bool own_namespace = false;
  {
    auto created = client.create(
        namespaces, *make_object("", ns,
                                 R"({"apiVersion":"v1","kind":"Namespace","metadata":{"name":")" +
                                     ns + R"("}})"));
    if (created) {
      own_namespace = true;
    } else if (created.error().http_status != 409) {
      log("error",
          "cannot create namespace " + ns + ": " + describe_error(created.error(), config.server));
      return kExitError;
    }
    // Pods need the namespace's "default" ServiceAccount when the ServiceAccount admission plugin
    // is on; without kube-controller-manager nobody creates it. Already there (409) is fine.
    const auto sa = client::dynamic_resource({"", "v1", "serviceaccounts", "ServiceAccount", true});
    (void)client.create(
        sa,
        *make_object(
            ns, "default",
            R"({"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"default","namespace":")" +
                ns + R"("}})"));
  }
  log("info", "demo starting",
      {{"namespace", ns},
       {"components", std::to_string(options.components)},
       {"mode", options.unshared ? "unshared" : "shared"},
       {"duration", std::to_string(options.duration_seconds) + "s"},
       {"server", config.server}});

  // Factories: one shared, or one per component.
  std::vector<std::unique_ptr<informer::InformerFactory>> factories;
  auto lister_watchers = [&client](const client::ResourceType& t, const std::string& n) {
    return client.lister_watcher(t, n);
  };
  const std::size_t n_factories =
      options.unshared ? static_cast<std::size_t>(options.components) : 1;
  for (std::size_t i = 0; i < n_factories; ++i)
    factories.push_back(std::make_unique<informer::InformerFactory>(lister_watchers));

  std::vector<Component> components(static_cast<std::size_t>(options.components));
  for (std::size_t i = 0; i < components.size(); ++i) {
    auto& c = components[i];
    c.role = kRoles[i % kRoles.size()];
    auto& factory = *factories[options.unshared ? i : 0];
    for (std::size_t r = 0; r < kResources; ++r) {
      c.events[r] = std::make_shared<std::atomic<std::uint64_t>>(0);
      c.informers[r] = &factory.informer(resources[r].type, {.namespace_ = ns});
      auto handler = std::make_shared<informer::ResourceEventHandlerFuncs>();
      handler->add = [e = c.events[r]](const client::ObjectPtr&, bool) { ++*e; };
      handler->update = [e = c.events[r]](const client::ObjectPtr&, const client::ObjectPtr&) {
        ++*e;
      };
      handler->del = [e = c.events[r]](const client::ObjectPtr&, bool) { ++*e; };
      c.registrations.push_back(c.informers[r]->add_handler(handler, {.name = c.role}));
    }
  }
  for (auto& f : factories) f->start();

  auto snapshot = [&](long elapsed) {
    DemoSnapshot s;
    s.namespace_ = ns;
    s.unshared = options.unshared;
    s.components = components.size();
    s.elapsed_seconds = elapsed;
    s.duration_seconds = options.duration_seconds;
    for (const auto& f : factories)
      for (const auto& [key, count] : f->handler_counts()) s.handlers += count;
    const auto audit = read_audit(client);
    for (std::size_t r = 0; r < kResources; ++r) {
      DemoRow row;
      row.resource = resources[r].label;
      row.objects = components.empty() ? 0 : components[0].informers[r]->store().size();
      for (const auto& c : components) row.events += c.events[r]->load();
      if (audit)
        row.server_watches =
            audit->count(resources[r].audit_name) - baseline->count(resources[r].audit_name);
      s.rows.push_back(row);
    }
    return s;
  };

  Churn churn(client, ns, options.ops_per_second);
  churn.start();

  const bool tty = isatty(STDOUT_FILENO) == 1;
  std::size_t drawn = 0;
  auto draw = [&](const DemoSnapshot& s) {
    std::string text;
    if (tty) {
      if (drawn > 0) text += "\x1b[" + std::to_string(drawn) + "F\x1b[J";
      const auto table = format_demo_table(s, churn.ops(), churn.errors());
      text += table;
      drawn = static_cast<std::size_t>(std::count(table.begin(), table.end(), '\n'));
    } else {
      text = format_demo_tick(s) + "\n";
    }
    std::lock_guard lock(stdout_mutex());
    std::cout << text << std::flush;
  };

  const sigset_t signals = kwatch_signals();
  const auto start = Clock::now();
  bool interrupted = false;
  for (long tick = 1; tick <= options.duration_seconds && !interrupted; ++tick) {
    const auto until = start + std::chrono::seconds(tick);
    while (true) {
      const auto left = until - Clock::now();
      if (left <= 0s) break;
      const auto ns_left = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
      timespec wait{static_cast<time_t>(ns_left / 1'000'000'000),
                    static_cast<long>(ns_left % 1'000'000'000)};
      const int sig = sigtimedwait(&signals, nullptr, &wait);
      if (sig == SIGINT || sig == SIGTERM) {
        interrupted = true;
        break;
      }
    }
    draw(snapshot(tick));
  }
  churn.stop();
  log("info", "churn stopped; waiting for the caches to converge",
      {{"ops", std::to_string(churn.ops())}, {"errors", std::to_string(churn.errors())}});

  // Convergence: every informer's cache equals the server's list (name + resourceVersion).
  std::vector<std::string> diverged;
  const auto converge_deadline = Clock::now() + 30s;
  while (true) {
    diverged.clear();
    for (std::size_t r = 0; r < kResources; ++r) {
      auto listed = client.list_all(resources[r].type, ns);
      if (!listed) {
        diverged.push_back(resources[r].label + " (list failed: " + listed.error().to_string() +
                           ")");
        continue;
      }
      const auto server = by_name(listed->items);
      std::size_t bad = 0;
      for (const auto& f : factories) {
        auto& inf = f->informer(resources[r].type, {.namespace_ = ns});
        if (by_name(inf.store().list()) != server) ++bad;
      }
      if (bad > 0)
        diverged.push_back(resources[r].label + " (" + std::to_string(bad) + " caches differ)");
    }
    if (diverged.empty() || Clock::now() >= converge_deadline) break;
    std::this_thread::sleep_for(250ms);  // polling interval
  }

  // The server's count moves a little after connections open: let it settle on the expectation.
  const long expected = options.unshared ? options.components : 1;
  DemoSnapshot final_snapshot;
  const auto settle_deadline = Clock::now() + 10s;
  while (true) {
    final_snapshot =
        snapshot(std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - start).count());
    bool settled = true;
    for (const auto& row : final_snapshot.rows) settled = settled && row.server_watches == expected;
    if (settled || Clock::now() >= settle_deadline) break;
    std::this_thread::sleep_for(250ms);  // polling interval
  }
  {
    std::lock_guard lock(stdout_mutex());
    if (tty && drawn > 0) std::cout << "\x1b[" << drawn << "F\x1b[J";
    std::cout << format_demo_table(final_snapshot, churn.ops(), churn.errors());
  }
  const DemoVerdict verdict = demo_verdict(final_snapshot, diverged);
  {
    std::lock_guard lock(stdout_mutex());
    std::cout << verdict.line << '\n' << std::flush;
  }

  components.clear();  // closes every registration
  for (auto& f : factories) f->shutdown();
  factories.clear();

  const std::size_t deleted = churn.cleanup();
  if (own_namespace) {
    auto s = client.delete_(namespaces, "", ns);
    if (!s)
      log("warn", "cleanup: deleting the namespace failed",
          {{"namespace", ns}, {"error", s.error().to_string()}});
  }
  log("info", "cleaned up",
      {{"deleted", std::to_string(deleted)},
       {"namespace", ns},
       {"namespaceDeleted", own_namespace ? "true" : "false"}});
  return verdict.exit_code;
}

}  // namespace kinformer::tools
