// ClusterRegistry against in-process scripted API servers (FakeApiServer): one "local" server
// holding the kubeconfig Secrets, one or two "remote" servers holding Pods. Deterministic: every
// wait is a condition wait with a deadline; no sleeps. The real-server e2e is
// e2e/suites/multicluster_e2e_test.cc.
#include "kinformer/mesh/cluster_registry.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <prometheus/registry.h>

#include "kinformer/prometheus/prometheus_registry.h"

#include "base64.h"
#include "fake_apiserver.h"
#include "fakes.h"
#include "kinformer/client/pod.h"
#include "kinformer/client/rest_client.h"
#include "kinformer/client/secret.h"
#include "kinformer/mesh/cluster_endpoint_feeds.h"
#include "log_capture.h"

namespace kinformer::mesh {
namespace {

using namespace informer;

using namespace std::chrono_literals;
using testing::FakeApiServer;
using testing::Reply;
using testing::Request;
using testing::ScriptedStream;

constexpr const char* kSecrets = "/api/v1/namespaces/mesh/secrets";
constexpr const char* kPods = "/api/v1/pods";
constexpr const char* kSlices = "/apis/discovery.k8s.io/v1/endpointslices";

using testing::base64;

// An API server holding collections (path -> name -> object JSON with a placeholder RV), serving
// LIST and WATCH of each; changes go to every open watch of that path.
class MiniCluster {
 public:
  explicit MiniCluster(std::string kind_prefix = "") : kind_prefix_(std::move(kind_prefix)) {}

  void serve(const std::string& path, const std::string& list_kind) {
    server.on("GET", path, [this, path, list_kind](const Request& r) {
      std::lock_guard lock(mu_);
      auto& c = collections_[path];
      if (c.forbidden)
        return Reply::api_status(403, "Forbidden", "secrets is forbidden: User \"x\" cannot list");
      if (r.param("watch") == std::optional<std::string>("true") ||
          r.param("watch") == std::optional<std::string>("1")) {
        auto stream = std::make_shared<ScriptedStream>();
        c.watches.push_back(stream);
        ++c.watch_requests;
        cv_.notify_all();
        return Reply::streaming(stream);
      }
      ++c.list_requests;
      std::string out = R"({"kind":")" + list_kind +
                        R"(","apiVersion":"v1","metadata":{"resourceVersion":")" +
                        std::to_string(rv_) + R"("},"items":[)";
      bool first = true;
      for (const auto& [name, json] : c.objects) {
        out += (first ? "" : ",") + json;
        first = false;
      }
      return Reply::json(out + "]}");
    });
  }
  // `make(rv)` returns the object's JSON at resourceVersion rv.
  void put(const std::string& path, const std::string& name,
           const std::function<std::string(const std::string&)>& make) {
    std::lock_guard lock(mu_);
    auto& c = collections_[path];
    std::string json = make(std::to_string(++rv_));
    bool existed = c.objects.contains(name);
    c.objects[name] = json;
    send(c, existed ? "MODIFIED" : "ADDED", json);
  }
  void remove(const std::string& path, const std::string& name) {
    std::lock_guard lock(mu_);
    auto& c = collections_[path];
    auto it = c.objects.find(name);
    if (it == c.objects.end()) return;
    std::string json = it->second;
    c.objects.erase(it);
    ++rv_;
    send(c, "DELETED", json);
  }
  void forbid(const std::string& path, bool forbidden) {
    std::lock_guard lock(mu_);
    collections_[path].forbidden = forbidden;
  }
  // Waits until `n` watches of `path` were opened in all.
  bool wait_watch_requests(const std::string& path, std::size_t n,
                           std::chrono::milliseconds timeout = 10s) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return collections_[path].watch_requests >= n; });
  }
  std::size_t watch_requests(const std::string& path) {
    std::lock_guard lock(mu_);
    return collections_[path].watch_requests;
  }
  std::size_t open_watches(const std::string& path) {
    std::lock_guard lock(mu_);
    auto& w = collections_[path].watches;
    std::erase_if(w, [](const auto& s) { return s->closed(); });
    return w.size();
  }
  // Authorization headers seen on requests of `path`.
  std::vector<std::string> tokens(const std::string& path) const {
    std::vector<std::string> out;
    for (const auto& r : server.requests()) {
      if (r.path == path) out.push_back(r.header("authorization"));
    }
    return out;
  }

 private:
  struct Collection {
    std::map<std::string, std::string> objects;
    std::vector<std::shared_ptr<ScriptedStream>> watches;
    std::size_t watch_requests = 0;
    std::size_t list_requests = 0;
    bool forbidden = false;
  };
  void send(Collection& c, const std::string& type, const std::string& json) {
    for (const auto& w : c.watches) w->send(testing::watch_event_line(type, json));
  }
  std::string kind_prefix_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Collection> collections_;
  std::uint64_t rv_ = 100;

 public:
  // Last: stopped (its thread joined) before the collections its handlers use are destroyed, also
  // when a client still calls it while the test ends.
  FakeApiServer server;
};

std::string kubeconfig_for(const FakeApiServer& server, const std::string& token) {
  return "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: c\n  cluster:\n    "
         "server: " +
         server.url() +
         "\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\nusers:\n- name: u\n  "
         "user:\n    token: " +
         token + "\n";
}

std::function<std::string(const std::string&)> secret(
    const std::string& name, const std::map<std::string, std::string>& data) {
  return [=](const std::string& rv) {
    std::string d;
    for (const auto& [k, v] : data)
      d += (d.empty() ? "" : ",") + ("\"" + k + "\":\"" + base64(v) + "\"");
    return R"({"kind":"Secret","apiVersion":"v1","metadata":{"name":")" + name +
           R"(","namespace":"mesh","resourceVersion":")" + rv +
           R"(","labels":{"kinformer.io/multicluster":"true"}},"type":"Opaque","data":{)" + d +
           "}}";
  };
}

std::function<std::string(const std::string&)> pod(const std::string& name) {
  return [=](const std::string& rv) {
    return R"({"kind":"Pod","apiVersion":"v1","metadata":{"name":")" + name +
           R"(","namespace":"app","resourceVersion":")" + rv +
           R"("},"spec":{"containers":[]},"status":{}})";
  };
}

// What a component saw, in order: "added west 1", "updated west 2<-1", "removed west 2".
class Journal {
 public:
  ClusterHandler handler(std::function<void(const RemoteClusterPtr&)> on_added = {}) {
    return ClusterHandler{
        .added =
            [this, on_added](const RemoteClusterPtr& c) {
              if (on_added) on_added(c);
              record("added " + c->id + " " + std::to_string(c->generation), c);
            },
        .updated =
            [this](const RemoteClusterPtr& now, const RemoteClusterPtr& before) {
              // Make-before-break: the new factory runs the old one's informers, synced.
              updated_synced_ = updated_synced_ && now->factory->has_synced() &&
                                now->factory->informer_count() == before->factory->informer_count();
              record("updated " + now->id + " " + std::to_string(now->generation) + "<-" +
                         std::to_string(before->generation),
                     now);
            },
        .removed =
            [this](const RemoteClusterPtr& c) {
              record("removed " + c->id + " " + std::to_string(c->generation), c);
            },
    };
  }
  bool wait_for(std::size_t n, std::chrono::milliseconds timeout = 10s) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return lines_.size() >= n; });
  }
  std::vector<std::string> lines() {
    std::lock_guard lock(mu_);
    return lines_;
  }
  RemoteClusterPtr last() {
    std::lock_guard lock(mu_);
    return last_;
  }
  bool updated_synced() const { return updated_synced_; }

 private:
  void record(std::string line, RemoteClusterPtr c) {
    std::lock_guard lock(mu_);
    lines_.push_back(std::move(line));
    last_ = std::move(c);
    cv_.notify_all();
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> lines_;
  RemoteClusterPtr last_;
  std::atomic<bool> updated_synced_{true};
};

struct Fixture {
  std::shared_ptr<prom::PrometheusRegistry> prometheus =
      std::make_shared<prom::PrometheusRegistry>();
  explicit Fixture(std::chrono::milliseconds sync_timeout = 10s) {
    local.serve(kSecrets, "SecretList");
    local_client = std::make_shared<client::RestClient>(local.server.cluster_config());
    FactoryOptions fo;
    fo.use_watch_list = false;
    fo.log = capture.sink();
    fo.registry = prometheus;  // the registry's metrics go to the local factory's registry
    local_factory = std::make_shared<InformerFactory>(
        [c = local_client](const client::ResourceType& t, const std::string& ns) {
          return c->lister_watcher(t, ns);
        },
        fo);
    ClusterRegistryOptions o;
    o.secret_namespace = "mesh";
    o.sync_timeout = sync_timeout;
    o.start_timeout = 10s;
    o.remote_factory.use_watch_list = false;
    o.kubeconfig_policy.allow_insecure = true;  // the scripted servers speak plain HTTP
    o.log = capture.sink();
    registry = std::make_unique<ClusterRegistry>(local_client, local_factory, o);
  }
  ~Fixture() {
    if (registry) registry->shutdown();
    local_factory->shutdown();
  }
  double metric(const std::string& name, const std::string& label = "") {
    for (const auto& family : prometheus->registry().Collect()) {
      if (family.name != name) continue;
      double sum = 0;
      for (const auto& m : family.metric) {
        bool match = label.empty();
        for (const auto& l : m.label) match = match || (l.name + "=" + l.value) == label;
        if (!match) continue;
        sum += family.type == prometheus::MetricType::Counter ? m.counter.value : m.gauge.value;
      }
      return sum;
    }
    return 0;
  }

  testing::LogCapture capture;
  MiniCluster local;
  std::shared_ptr<client::RestClient> local_client;
  std::shared_ptr<InformerFactory> local_factory;
  std::unique_ptr<ClusterRegistry> registry;
};

// A component that uses each remote cluster's Pod informer (all namespaces).
std::function<void(const RemoteClusterPtr&)> uses_pods() {
  return [](const RemoteClusterPtr& c) { (void)c->factory->informer<client::Pod>(); };
}

ClusterStatus status(ClusterRegistry& r, const std::string& id) {
  for (auto& s : r.clusters()) {
    if (s.id == id) return s;
  }
  return ClusterStatus{.id = "<absent>"};
}

TEST(ClusterRegistryTest, FailedStartIsReturnedAndRetriedByTheNextCallerWithOneWatch) {
  Fixture f;
  f.local.forbid(kSecrets, true);
  client::Status first = f.registry->start();
  ASSERT_FALSE(first);
  EXPECT_EQ(first.error().http_status, 403);
  EXPECT_NE(first.error().message.find("namespace mesh"), std::string::npos)
      << first.error().message;
  EXPECT_FALSE(f.registry->started());
  EXPECT_EQ(f.local_factory->informer_count(), 0u);  // the failed start left no informer behind
  EXPECT_EQ(f.local.watch_requests(kSecrets), 0u);

  f.local.forbid(kSecrets, false);  // the grant
  ASSERT_TRUE(f.registry->start());
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(f.registry->start());  // later builds: no-ops
  ASSERT_TRUE(f.local.wait_watch_requests(kSecrets, 1));
  EXPECT_EQ(f.local_factory->informer_count(), 1u);
  EXPECT_EQ(f.local.open_watches(kSecrets), 1u);
  EXPECT_TRUE(f.registry->wait_for_sync(10s));
}

// Remote clusters' factories run their handlers on one pool, the registry's: threads do not
// grow with clusters. Mutant registry-remote-pool-per-cluster.
TEST(ClusterRegistryTest, RemoteClustersShareOneHandlerPool) {
  MiniCluster west, east;
  west.serve(kPods, "PodList");
  east.serve(kPods, "PodList");
  Fixture f;
  f.local.put(kSecrets, "remotes",
              secret("remotes", {{"west", kubeconfig_for(west.server, "tok-west")},
                                 {"east", kubeconfig_for(east.server, "tok-east")}}));
  Journal journal;
  auto sub = f.registry->subscribe(journal.handler(uses_pods()));
  ASSERT_TRUE(f.registry->start());
  ASSERT_TRUE(f.registry->wait_for_sync(10s));
  auto w = f.registry->factory("west");
  auto e = f.registry->factory("east");
  ASSERT_TRUE(w && e);
  EXPECT_EQ(w->executor_ptr(), e->executor_ptr());
  EXPECT_NE(w->executor_ptr(), f.local_factory->executor_ptr());
}

// The local factory outlives the registry: its informers' sync signals, which the registry
// listened to, still come and must reach nothing: never the registry's freed state (a poke on
// it goes unnoticed in a plain build; the ASan stage of the test command reports it), and never
// keep it alive to be destroyed on a reflector. The late informer signals after the registry
// went, surely; the others may signal while it goes.
TEST(ClusterRegistryTest, SyncSignalsAfterTheRegistryWentReachNothing) {
  Fixture f;
  f.local.serve(kPods, "PodList");
  ASSERT_TRUE(f.registry->start());
  ASSERT_TRUE(f.registry->wait_for_sync(10s));
  // Informers syncing while the registry goes, and after.
  // (All-namespace Pod informers told apart by selector: the scripted server serves one path.)
  std::vector<std::string> selectors;
  for (int i = 0; i < 8; ++i) selectors.push_back("app=a" + std::to_string(i));
  std::thread creator([&] {
    for (const auto& s : selectors)
      (void)f.local_factory->informer<client::Pod>({.label_selector = s});
  });
  f.registry.reset();
  creator.join();
  auto late = f.local_factory->informer<client::Pod>({.label_selector = "app=late"});
  ASSERT_TRUE(testing::eventually([&] { return late.has_synced(); }));
  for (const auto& s : selectors) {
    auto pods = f.local_factory->informer<client::Pod>({.label_selector = s});
    EXPECT_TRUE(testing::eventually([&] { return pods.has_synced(); })) << s;
  }
}

TEST(ClusterRegistryTest, SecretKeyBecomesARemoteClusterReachedThroughTheRegistry) {
  MiniCluster west;
  west.serve(kPods, "PodList");
  west.put(kPods, "p1", pod("p1"));
  Fixture f;
  f.local.put(kSecrets, "remotes",
              secret("remotes", {{"west", kubeconfig_for(west.server, "tok-west")}}));
  Journal journal;
  auto sub = f.registry->subscribe(journal.handler(uses_pods()));
  ASSERT_TRUE(f.registry->start());
  ASSERT_TRUE(journal.wait_for(1));
  EXPECT_EQ(journal.lines(), std::vector<std::string>{"added west 1"});
  ASSERT_TRUE(f.registry->wait_for_sync(10s));

  auto factory = f.registry->factory("west");
  ASSERT_TRUE(factory);
  EXPECT_EQ(factory, journal.last()->factory);
  EXPECT_EQ(f.registry->factory("local"), f.local_factory);
  EXPECT_EQ(f.registry->factory("nowhere"), nullptr);
  auto pods =
      factory->informer<client::Pod>();  // the component's informer: shared, not a new watch
  EXPECT_EQ(factory->informer_count(), 1u);
  EXPECT_TRUE(pods.store().get("app/p1"));
  for (const auto& t : west.tokens(kPods)) EXPECT_EQ(t, "Bearer tok-west");

  auto s = status(*f.registry, "west");
  EXPECT_EQ(s.state, ClusterState::synced) << s.reason;
  EXPECT_EQ(s.secret, "mesh/remotes");
  EXPECT_EQ(s.informers, 1u);
  EXPECT_EQ(s.freshness.state, informer::Freshness::State::fresh);
  EXPECT_TRUE(s.freshness.last_contact.has_value());
  EXPECT_EQ(f.registry->clusters().front().id, "local");
  EXPECT_EQ(f.registry->clusters().front().freshness.state, informer::Freshness::State::fresh);
  // The gauges are set by the registry's worker on its next look after the state changed.
  EXPECT_TRUE(
      testing::eventually([&] { return f.metric("kinformer_clusters", "state=synced") == 1; }));
  EXPECT_EQ(f.metric("kinformer_cluster_updates_total", "kind=added"), 1);

  // A late component gets the known cluster replayed as added.
  Journal late;
  auto late_sub = f.registry->subscribe(late.handler());
  ASSERT_TRUE(late.wait_for(1));
  EXPECT_EQ(late.lines(), std::vector<std::string>{"added west 1"});
}

TEST(ClusterRegistryTest, RefusedKubeconfigIsReportedByClusterAndFieldAndTheOthersGoOn) {
  MiniCluster west;
  west.serve(kPods, "PodList");
  Fixture f;
  std::string exec_config = kubeconfig_for(west.server, "tok-sneaky");
  exec_config.replace(
      exec_config.find("    token: tok-sneaky"), std::string("    token: tok-sneaky").size(),
      "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/sh");
  f.local.put(kSecrets, "remotes",
              secret("remotes",
                     {{"west", kubeconfig_for(west.server, "tok-west")}, {"evil", exec_config}}));
  Journal journal;
  auto sub = f.registry->subscribe(journal.handler(uses_pods()));
  ASSERT_TRUE(f.registry->start());
  ASSERT_TRUE(f.registry->wait_for_sync(10s));  // a refused cluster does not hold has_synced back
  EXPECT_EQ(journal.lines(), std::vector<std::string>{"added west 1"});
  EXPECT_EQ(f.registry->factory("evil"), nullptr);
  auto evil = status(*f.registry, "evil");
  EXPECT_EQ(evil.state, ClusterState::refused);
  EXPECT_NE(evil.reason.find("key 'evil'"), std::string::npos) << evil.reason;
  EXPECT_NE(evil.reason.find("exec is refused"), std::string::npos) << evil.reason;
  EXPECT_EQ(status(*f.registry, "west").state, ClusterState::synced);
  EXPECT_EQ(f.metric("kinformer_cluster_kubeconfig_refusals_total", "field=exec"), 1);
  auto records = f.capture.with_message("remote kubeconfig refused");
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].field("cluster"), "evil");
  EXPECT_EQ(records[0].field("field"), "exec");
  EXPECT_EQ(f.capture.text().find("tok-west"), std::string::npos);
  EXPECT_EQ(f.capture.text().find("tok-sneaky"), std::string::npos);
}

TEST(ClusterRegistryTest,
     UnchangedKubeconfigIsANoOpAndAChangedOneIsOneUpdateAfterTheNewClientSynced) {
  MiniCluster west;
  west.serve(kPods, "PodList");
  west.put(kPods, "p1", pod("p1"));
  Fixture f;
  f.local.put(kSecrets, "remotes",
              secret("remotes", {{"west", kubeconfig_for(west.server, "tok-1")}}));
  Journal journal;
  auto sub = f.registry->subscribe(journal.handler(uses_pods()));
  ASSERT_TRUE(f.registry->start());
  ASSERT_TRUE(f.registry->wait_for_sync(10s));
  ASSERT_TRUE(f.local.wait_watch_requests(kSecrets, 1));
  // The first client's watch is open too: its last request comes before the rotation below.
  ASSERT_TRUE(west.wait_watch_requests(kPods, 1));
  auto first = f.registry->cluster("west");
  ASSERT_TRUE(first);

  // Same content, new resourceVersion (e.g. a label added elsewhere): nothing happens.
  f.local.put(kSecrets, "remotes",
              secret("remotes", {{"west", kubeconfig_for(west.server, "tok-1")}}));
  // A second Secret with a cluster of its own proves the first event was processed.
  MiniCluster east;
  east.serve(kPods, "PodList");
  f.local.put(kSecrets, "more",
              secret("more", {{"east", kubeconfig_for(east.server, "tok-east")}}));
  ASSERT_TRUE(journal.wait_for(2));
  EXPECT_EQ(journal.lines(), (std::vector<std::string>{"added west 1", "added east 1"}));
  EXPECT_EQ(f.registry->cluster("west"), first);

  // A rotated token: make-before-break, one "updated", the old client stops afterwards.
  f.local.put(kSecrets, "remotes",
              secret("remotes", {{"west", kubeconfig_for(west.server, "tok-2")}}));
  ASSERT_TRUE(journal.wait_for(3));
  EXPECT_EQ(journal.lines(),
            (std::vector<std::string>{"added west 1", "added east 1", "updated west 2<-1"}));
  EXPECT_TRUE(journal.updated_synced());
  auto second = f.registry->cluster("west");
  ASSERT_TRUE(second);
  EXPECT_EQ(second->generation, 2u);
  EXPECT_TRUE(second->factory->informer<client::Pod>().store().get("app/p1"));
  EXPECT_EQ(west.tokens(kPods).back(), "Bearer tok-2");
  // The old factory is shut down by the registry (its watch closes).
  ASSERT_TRUE(f.registry->wait_for_sync(10s));
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::now() + 10s;
  while (west.open_watches(kPods) != 1 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::yield();
  EXPECT_EQ(west.open_watches(kPods), 1u);
  EXPECT_EQ(f.metric("kinformer_cluster_updates_total", "kind=updated"), 1);
}

TEST(ClusterRegistryTest, RemovedKeyOrSecretRemovesTheClusterAndStopsItsWatches) {
  MiniCluster west;
  west.serve(kPods, "PodList");
  MiniCluster east;
  east.serve(kPods, "PodList");
  Fixture f;
  f.local.put(kSecrets, "remotes",
              secret("remotes", {{"west", kubeconfig_for(west.server, "t")},
                                 {"east", kubeconfig_for(east.server, "t")}}));
  Journal journal;
  auto sub = f.registry->subscribe(journal.handler(uses_pods()));
  ASSERT_TRUE(f.registry->start());
  ASSERT_TRUE(journal.wait_for(2));
  ASSERT_TRUE(west.wait_watch_requests(kPods, 1));
  ASSERT_TRUE(east.wait_watch_requests(kPods, 1));
  // The scripted server sends a change only to the watches open at that moment (no replay from
  // a resourceVersion): the registry's Secret watch must be open before the edit.
  ASSERT_TRUE(f.local.wait_watch_requests(kSecrets, 1));

  f.local.put(kSecrets, "remotes",
              secret("remotes", {{"east", kubeconfig_for(east.server, "t")}}));  // key removed
  ASSERT_TRUE(journal.wait_for(3));
  EXPECT_EQ(journal.lines().back(), "removed west 1");
  EXPECT_EQ(f.registry->factory("west"), nullptr);
  EXPECT_EQ(status(*f.registry, "west").id, "<absent>");

  f.local.remove(kSecrets, "remotes");  // Secret deleted
  ASSERT_TRUE(journal.wait_for(4));
  EXPECT_EQ(journal.lines().back(), "removed east 1");
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::now() + 10s;
  while ((west.open_watches(kPods) != 0 || east.open_watches(kPods) != 0) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  EXPECT_EQ(west.open_watches(kPods), 0u);
  EXPECT_EQ(east.open_watches(kPods), 0u);
  EXPECT_EQ(f.metric("kinformer_cluster_updates_total", "kind=removed"), 2);
}

TEST(ClusterRegistryTest, UnreachableRemoteTimesOutIsCountedAndDelaysNoOtherCluster) {
  MiniCluster west;
  west.serve(kPods, "PodList");
  std::string dead_server;
  {
    FakeApiServer gone;  // a port nothing listens on once it is destroyed
    dead_server = kubeconfig_for(gone, "t");
  }
  Fixture f(300ms);
  f.local.put(
      kSecrets, "remotes",
      secret("remotes", {{"west", kubeconfig_for(west.server, "t")}, {"dead", dead_server}}));
  Journal journal;
  auto sub = f.registry->subscribe(journal.handler(uses_pods()));
  ASSERT_TRUE(f.registry->start());
  ASSERT_TRUE(f.registry->wait_for_sync(10s));  // dead hit its sync timeout; west synced
  EXPECT_EQ(status(*f.registry, "west").state, ClusterState::synced);
  auto dead = status(*f.registry, "dead");
  EXPECT_EQ(dead.state, ClusterState::timed_out);
  EXPECT_NE(dead.reason.find("network"), std::string::npos) << dead.reason;
  EXPECT_EQ(f.metric("kinformer_cluster_sync_timeouts_total", "cluster=dead"), 1);
  EXPECT_EQ(
      f.capture.with_message("remote cluster did not sync within the sync timeout; still retrying")
          .size(),
      1u);
}

TEST(ClusterRegistryTest, BuildingAndClosingComponentsStopsNothingAndKeepsOneSecretWatch) {
  MiniCluster west;
  west.serve(kPods, "PodList");
  Fixture f;
  f.local.put(kSecrets, "remotes", secret("remotes", {{"west", kubeconfig_for(west.server, "t")}}));
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(f.registry->start());
    Journal journal;
    auto sub = f.registry->subscribe(journal.handler(uses_pods()));
    if (i % 50 == 0) {
      ASSERT_TRUE(journal.wait_for(1));
    }
    sub.close();
  }
  ASSERT_TRUE(f.registry->wait_for_sync(10s));
  // Synced once its list is in: the Secret informer's watch follows that list.
  ASSERT_TRUE(f.local.wait_watch_requests(kSecrets, 1));
  EXPECT_EQ(f.local.watch_requests(kSecrets), 1u);
  EXPECT_EQ(f.local.open_watches(kSecrets), 1u);
  EXPECT_EQ(f.local_factory->informer_count(), 1u);
  ASSERT_TRUE(f.registry->factory("west"));
  EXPECT_EQ(f.registry->factory("west")->informer_count(), 1u);  // one Pod informer for all of them
  ASSERT_TRUE(west.wait_watch_requests(kPods, 1));  // the informer lists first, then watches
  EXPECT_EQ(west.watch_requests(kPods), 1u);
}

std::function<std::string(const std::string&)> slice(const std::string& name,
                                                     const std::vector<std::string>& addresses) {
  return [=](const std::string& rv) {
    std::string eps;
    for (const auto& a : addresses)
      eps += (eps.empty() ? "" : ",") + (R"({"addresses":[")" + a + R"("]})");
    return R"({"kind":"EndpointSlice","apiVersion":"discovery.k8s.io/v1","metadata":{"name":")" +
           name + R"(","namespace":"app","resourceVersion":")" + rv +
           R"(","labels":{"kubernetes.io/service-name":"svc"}},"addressType":"IPv4","ports":[{"name":"http","port":80}],"endpoints":[)" +
           eps + "]}";
  };
}

void serve_version(FakeApiServer& server, int status = 200) {
  server.on("GET", "/version", [status](const Request&) {
    return status == 200 ? Reply::json(R"({"major":"1","minor":"36"})")
                         : Reply::api_status(status, "Failure", "no");
  });
}

TEST(ClusterRegistryTest, ARemoteWithoutInformersIsProbedNeverAssumedSynced) {
  MiniCluster west;
  serve_version(west.server);
  MiniCluster revoked;
  serve_version(revoked.server, 401);
  MiniCluster wrong_url;  // answers, but not as an API server: 404 (a path prefix missing)
  serve_version(wrong_url.server, 404);
  MiniCluster no_backends;  // a load balancer in front of nothing: 503
  serve_version(no_backends.server, 503);
  std::string dead_server;
  {
    FakeApiServer gone;
    dead_server = kubeconfig_for(gone, "t");
  }
  Fixture f(300ms);
  f.local.put(kSecrets, "remotes",
              secret("remotes", {{"west", kubeconfig_for(west.server, "t")},
                                 {"revoked", kubeconfig_for(revoked.server, "t")},
                                 {"wrong-url", kubeconfig_for(wrong_url.server, "t")},
                                 {"no-backends", kubeconfig_for(no_backends.server, "t")},
                                 {"dead", dead_server}}));
  ASSERT_TRUE(f.registry->start());  // no subscriber: nobody creates an informer there
  ASSERT_TRUE(f.registry->wait_for_sync(10s));
  EXPECT_EQ(status(*f.registry, "west").state, ClusterState::synced)
      << status(*f.registry, "west").reason;
  for (const char* id : {"dead", "revoked", "wrong-url", "no-backends"}) {
    auto s = status(*f.registry, id);
    EXPECT_EQ(s.state, ClusterState::timed_out) << id << ": " << s.reason;
    EXPECT_FALSE(s.reason.empty()) << id;
  }
  EXPECT_NE(status(*f.registry, "revoked").reason.find("HTTP 401"), std::string::npos)
      << status(*f.registry, "revoked").reason;
  EXPECT_NE(status(*f.registry, "dead").reason.find("network"), std::string::npos)
      << status(*f.registry, "dead").reason;
  EXPECT_NE(status(*f.registry, "wrong-url").reason.find("HTTP 404"), std::string::npos);
  EXPECT_NE(status(*f.registry, "no-backends").reason.find("HTTP 503"), std::string::npos);
  EXPECT_EQ(f.metric("kinformer_cluster_sync_timeouts_total"), 4);
}

TEST(ClusterRegistryTest, SubscribingFromInsideAHandlerIsSafe) {
  MiniCluster west;
  west.serve(kPods, "PodList");
  Fixture f;
  f.local.put(kSecrets, "remotes", secret("remotes", {{"west", kubeconfig_for(west.server, "t")}}));
  std::vector<ClusterSubscription> inner;  // touched only on the registry's thread
  std::vector<std::unique_ptr<Journal>> journals;
  for (int i = 0; i < 16; ++i) journals.push_back(std::make_unique<Journal>());
  auto outer = f.registry->subscribe(ClusterHandler{.added = [&](const RemoteClusterPtr&) {
    for (auto& j : journals)
      inner.push_back(f.registry->subscribe(j->handler()));  // grows subscribers_ meanwhile
  }});
  ASSERT_TRUE(f.registry->start());
  for (auto& j : journals) {
    ASSERT_TRUE(j->wait_for(1));
    EXPECT_EQ(j->lines(), std::vector<std::string>{"added west 1"});
  }
  f.registry->shutdown();  // before `inner` and the journals go
}

TEST(ClusterRegistryTest, AKubeconfigEditedIntoARefusedOneKeepsTheWorkingClient) {
  MiniCluster west;
  west.serve(kPods, "PodList");
  Fixture f;
  f.local.put(kSecrets, "remotes",
              secret("remotes", {{"west", kubeconfig_for(west.server, "tok-1")}}));
  Journal journal;
  auto sub = f.registry->subscribe(journal.handler(uses_pods()));
  ASSERT_TRUE(f.registry->start());
  ASSERT_TRUE(f.registry->wait_for_sync(10s));
  auto working = f.registry->cluster("west");
  ASSERT_TRUE(f.local.wait_watch_requests(kSecrets, 1));  // changes go to open watches only
  std::string exec_config = kubeconfig_for(west.server, "tok-1");
  exec_config.replace(
      exec_config.find("    token: tok-1"), std::string("    token: tok-1").size(),
      "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/sh");
  f.local.put(kSecrets, "remotes", secret("remotes", {{"west", exec_config}}));
  ASSERT_TRUE(testing::eventually(
      [&] { return status(*f.registry, "west").state == ClusterState::refused; }));
  auto s = status(*f.registry, "west");
  EXPECT_NE(s.reason.find("exec is refused"), std::string::npos) << s.reason;
  EXPECT_NE(s.reason.find("still using the previous kubeconfig"), std::string::npos) << s.reason;
  EXPECT_EQ(f.registry->cluster("west"), working);
  EXPECT_EQ(journal.lines(), std::vector<std::string>{"added west 1"});  // no "removed"
}

// A rotated kubeconfig whose client never syncs (its server answers 404 to everything): after the
// sync timeout the registry switches, and the shard keeps what the old client knew instead of
// being pruned against empty stores. Rotating to a working client later prunes and converges.
TEST(ClusterRegistryTest, ASwitchAfterASyncTimeoutNeverEmptiesTheShard) {
  MiniCluster west;
  west.serve(kPods, "PodList");
  west.serve(kSlices, "EndpointSliceList");
  west.put(kSlices, "s1", slice("s1", {"10.0.0.1", "10.0.0.2"}));
  MiniCluster broken;  // no handlers: every request is a 404
  Fixture f(300ms);
  f.local.put(kSecrets, "remotes",
              secret("remotes", {{"west", kubeconfig_for(west.server, "tok-1")}}));
  auto index = std::make_shared<EndpointIndex>();
  EndpointQuery q;
  q.service = {"app", "svc"};
  q.port_name = "http";
  auto addresses = [&] {
    std::vector<std::string> out;
    const EndpointSnapshotPtr snap = index->snapshot(q);  // owns what cluster() points into
    if (const auto* part = snap->cluster("west")) {
      for (const auto& e : part->endpoints) out.push_back(e.address);
    } else {
      out.push_back("<absent>");
    }
    return out;
  };
  ClusterEndpointFeeds feeds(index, *f.registry, {}, /*include_local=*/false);
  ASSERT_TRUE(f.registry->start());
  ASSERT_TRUE(testing::eventually([&] {
    return addresses() == std::vector<std::string>{"10.0.0.1", "10.0.0.2"};
  }));
  ASSERT_TRUE(f.local.wait_watch_requests(kSecrets, 1));  // changes go to open watches only

  f.local.put(kSecrets, "remotes",
              secret("remotes", {{"west", kubeconfig_for(broken.server, "tok-2")}}));
  ASSERT_TRUE(testing::eventually([&] {
    auto c = f.registry->cluster("west");
    return c && c->generation == 2;
  }));
  EXPECT_EQ(addresses(), (std::vector<std::string>{"10.0.0.1", "10.0.0.2"}));
  EXPECT_EQ(status(*f.registry, "west").state, ClusterState::timed_out);

  // Meanwhile s1 lost an endpoint; a working client again: synced, pruned, converged.
  west.put(kSlices, "s1", slice("s1", {"10.0.0.2"}));
  f.local.put(kSecrets, "remotes",
              secret("remotes", {{"west", kubeconfig_for(west.server, "tok-3")}}));
  ASSERT_TRUE(
      testing::eventually([&] { return addresses() == std::vector<std::string>{"10.0.0.2"}; }));
  feeds.close();
}

}  // namespace
}  // namespace kinformer::mesh

namespace kinformer::mesh {
namespace {

using namespace informer;

// A subscriber that arrives after a cluster synced hears `synced` in its replay (the header
// tells it to wait for `synced` before trusting the caches). Mutant registry-replay-drops-synced.
TEST(ClusterRegistryTest, ALateSubscriberHearsSyncedForAClusterThatSynced) {
  MiniCluster west;
  west.serve(kPods, "PodList");
  Fixture f;
  f.local.put(kSecrets, "remotes", secret("remotes", {{"west", kubeconfig_for(west.server, "t")}}));
  Journal early;
  auto first = f.registry->subscribe(early.handler(uses_pods()));
  ASSERT_TRUE(f.registry->start());
  ASSERT_TRUE(f.registry->wait_for_sync(10s));
  ASSERT_EQ(status(*f.registry, "west").state, ClusterState::synced);

  std::mutex mu;
  std::vector<std::string> lines;
  auto note = [&](const std::string& what, const RemoteClusterPtr& c) {
    std::lock_guard lock(mu);
    lines.push_back(what + " " + c->id + " " + std::to_string(c->generation));
  };
  auto late = f.registry->subscribe(ClusterHandler{
      .added = [&](const RemoteClusterPtr& c) { note("added", c); },
      .synced = [&](const RemoteClusterPtr& c) { note("synced", c); },
  });
  ASSERT_TRUE(testing::eventually([&] {
    std::lock_guard lock(mu);
    return lines.size() >= 2;
  }));
  std::lock_guard lock(mu);
  EXPECT_EQ(lines, (std::vector<std::string>{"added west 1", "synced west 1"}));
}

// A switch of client while one of the old client's handlers runs an index callback that calls
// into ClusterEndpointFeeds (it takes the feeds' lock): the old feed is closed outside that lock,
// so the callback returns and the switch completes. Closing it under the lock deadlocked: the
// switch waited for the callback, the callback for the lock. Mutant
// registry-feeds-close-under-lock (a deadlock: killed by its timeout).
TEST(ClusterRegistryTest, ASwitchWhileAnOldHandlerCallsIntoTheFeedsCompletes) {
  MiniCluster west;
  west.serve(kPods, "PodList");
  west.serve(kSlices, "EndpointSliceList");
  west.put(kSlices, "s1", slice("s1", {"10.0.0.1"}));
  Fixture f;
  f.local.put(kSecrets, "remotes",
              secret("remotes", {{"west", kubeconfig_for(west.server, "tok-1")}}));
  auto index = std::make_shared<EndpointIndex>();
  EndpointQuery q;
  q.service = {"app", "svc"};
  q.port_name = "http";
  auto addresses = [&] {
    std::vector<std::string> out;
    const EndpointSnapshotPtr snap = index->snapshot(q);
    if (const auto* part = snap->cluster("west")) {
      for (const auto& e : part->endpoints) out.push_back(e.address);
    }
    return out;
  };
  // Subscribed before the feeds: its `updated` runs just before theirs.
  testing::Gate switching;
  auto before_feeds = f.registry->subscribe(ClusterHandler{
      .updated = [&](const RemoteClusterPtr&, const RemoteClusterPtr&) { switching.open(); }});
  std::unique_ptr<ClusterEndpointFeeds> feeds;
  std::atomic<bool> armed{false};
  std::atomic<bool> callback_returned{false};
  auto watch = index->watch(q, [&](const EndpointSnapshotPtr&) {
    if (!armed.exchange(false)) return;
    // On the old client's handler: stay until the switch is under way, then call into the feeds
    // for a while (their `updated` closes this very handler meanwhile).
    ASSERT_TRUE(switching.wait());
    const auto until = std::chrono::steady_clock::now() + 500ms;
    while (std::chrono::steady_clock::now() < until) (void)feeds->clusters();
    callback_returned = true;
  });
  feeds = std::make_unique<ClusterEndpointFeeds>(index, *f.registry, EndpointFeedOptions{},
                                                 /*include_local=*/false);
  ASSERT_TRUE(f.registry->start());
  ASSERT_TRUE(
      testing::eventually([&] { return addresses() == std::vector<std::string>{"10.0.0.1"}; }));
  ASSERT_TRUE(f.local.wait_watch_requests(kSecrets, 1));  // changes go to open watches only

  armed = true;
  west.put(kSlices, "s1", slice("s1", {"10.0.0.1", "10.0.0.2"}));  // reaches the old client
  f.local.put(kSecrets, "remotes",
              secret("remotes", {{"west", kubeconfig_for(west.server, "tok-2")}}));
  ASSERT_TRUE(testing::eventually([&] {
    auto c = f.registry->cluster("west");
    return callback_returned.load() && c && c->generation == 2 &&
           addresses() == std::vector<std::string>{"10.0.0.1", "10.0.0.2"};
  }));
  feeds->close();
}

}  // namespace
}  // namespace kinformer::mesh
