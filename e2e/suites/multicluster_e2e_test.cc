// ClusterRegistry + EndpointIndex against two real API servers: the cluster under test
// (KUBECONFIG, "local": it holds the kubeconfig Secrets) and a second, independent launcher
// instance started by this suite ("remote": its own etcd, certificates and ports).
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base64.h"
#include "e2e_env.h"
#include "kinformer/client/endpoint_slice.h"
#include "kinformer/client/pod.h"
#include "kinformer/mesh/cluster_endpoint_feeds.h"
#include "kinformer/mesh/cluster_registry.h"
#include "kinformer/mesh/endpoint_index.h"
#include "kinformer/mesh/endpoint_subscriptions.h"
#include "tcp_proxy.h"

#ifndef KWATCH_PATH
#error "KWATCH_PATH must be defined (the kwatch binary)"
#endif

namespace kinformer::e2e {
namespace {

using namespace std::chrono_literals;
using mesh::ClusterRegistry;
using mesh::ClusterState;
using mesh::RemoteClusterPtr;

std::string remote_dir() { return "/tmp/kinformer-e2e-remote-" + std::to_string(::getpid()); }

int run_launcher(const std::string& args) {
  std::string cmd = std::string(KINFORMER_SOURCE_DIR) + "/e2e/launcher.sh " + args + " --dir " +
                    remote_dir() + " >" + remote_dir() + ".log 2>&1";
  return std::system(cmd.c_str());
}

// A kubeconfig for the remote server with inline fields only (what the default policy accepts):
// the CA as data and either the admin client certificate or a bearer token.
std::string inline_kubeconfig(const std::string& server, const std::string& user_fields) {
  return "apiVersion: v1\nkind: Config\ncurrent-context: remote\nclusters:\n- name: remote\n  "
         "cluster:\n    server: " +
         server + "\n    certificate-authority-data: " +
         testing::base64(slurp(remote_dir() + "/pki/ca.crt")) +
         "\ncontexts:\n- name: remote\n  context:\n    cluster: remote\n    user: "
         "remote\nusers:\n- name: remote\n  user:\n" +
         user_fields;
}

std::string admin_user_fields() {
  return "    client-certificate-data: " + testing::base64(slurp(remote_dir() + "/pki/admin.crt")) +
         "\n    client-key-data: " + testing::base64(slurp(remote_dir() + "/pki/admin.key")) + "\n";
}

// The few dynamic types this suite writes (version v1), one per resource path.
const client::ResourceType& dynamic(const std::string& group, const std::string& resource,
                                    const std::string& kind) {
  static std::mutex mu;
  static std::map<std::string, client::ResourceType> types;
  std::lock_guard lock(mu);
  auto it = types.find(resource);
  if (it == types.end())
    it = types.emplace(resource, client::dynamic_resource({group, "v1", resource, kind, true}))
             .first;
  return it->second;
}

// The newest snapshot per version, and the whole history by version (callbacks may arrive out
// of order; the version orders them).
class History {
 public:
  void add(const mesh::EndpointSnapshotPtr& s) {
    std::lock_guard lock(mu_);
    by_version_[s->version] = s;
    cv_.notify_all();
  }
  // "absent", or the cluster's addresses in the newest snapshot.
  std::vector<std::string> addresses(const std::string& cluster) {
    std::lock_guard lock(mu_);
    return addresses_locked(cluster);
  }
  bool wait(const std::string& cluster, const std::vector<std::string>& want,
            std::chrono::milliseconds timeout = 60s) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return addresses_locked(cluster) == want; });
  }
  std::vector<std::vector<std::string>> all(const std::string& cluster) {
    std::lock_guard lock(mu_);
    std::vector<std::vector<std::string>> out;
    for (const auto& [v, s] : by_version_) out.push_back(of(*s, cluster));
    return out;
  }

 private:
  static std::vector<std::string> of(const mesh::EndpointSnapshot& s, const std::string& cluster) {
    const auto* part = s.cluster(cluster);
    if (part == nullptr) return {"absent"};
    std::vector<std::string> out;
    for (const auto& e : part->endpoints) out.push_back(e.address);
    return out;
  }
  std::vector<std::string> addresses_locked(const std::string& cluster) {
    if (by_version_.empty()) return {"absent"};
    return of(*by_version_.rbegin()->second, cluster);
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::uint64_t, mesh::EndpointSnapshotPtr> by_version_;
};

class MulticlusterE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_EQ(run_launcher("up"), 0)
        << "starting the second API server failed; see " << remote_dir() << ".log";
  }
  static void TearDownTestSuite() { run_launcher("down --purge"); }

  MulticlusterE2E()
      : local_(std::make_shared<client::RestClient>(admin_config(), fast_client_options())),
        remote_admin_(inline_config(admin_user_fields())) {}

  // The remote's admin client for the suite's own writes and /metrics.
  static client::RestClient inline_config(const std::string& user) {
    return client::RestClient(
        client::ClusterConfig::from_kubeconfig_data(inline_kubeconfig(server(), user)),
        fast_client_options());
  }
  static std::string server() {
    std::string k = slurp(remote_dir() + "/kubeconfig");
    auto at = k.find("server: ");
    return k.substr(at + 8, k.find('\n', at) - at - 8);
  }

  void SetUp() override {
    secrets_ns_ = create_namespace(*local_, "mc-secrets");
    remote_ns_ = create_namespace(remote_admin_, "mc-remote");
    factory_ = std::make_shared<informer::InformerFactory>(
        [c = local_](const client::ResourceType& t, const std::string& ns) {
          return c->lister_watcher(t, ns);
        });
  }
  void TearDown() override {
    if (registry_) registry_->shutdown();
    factory_->shutdown();
  }

  mesh::ClusterRegistryOptions registry_options() {
    mesh::ClusterRegistryOptions o;
    o.secret_namespace = secrets_ns_;
    o.sync_timeout = 30s;
    return o;
  }

  void put_secret(const std::string& name, const std::map<std::string, std::string>& data) {
    std::string d;
    for (const auto& [k, v] : data)
      d += (d.empty() ? "" : ",") + ("\"" + k + "\":\"" + testing::base64(v) + "\"");
    std::string json = R"({"apiVersion":"v1","kind":"Secret","metadata":{"name":")" + name +
                       R"(","namespace":")" + secrets_ns_ +
                       R"(","labels":{"kinformer.io/multicluster":"true"}},"data":{)" + d + "}}";
    auto existing = local_->get(secrets(), secrets_ns_, name);
    if (existing) {
      json.insert(json.find(R"(,"labels")"),
                  R"(,"resourceVersion":")" + existing.value()->metadata.resource_version + "\"");
      ASSERT_TRUE(local_->update(secrets(), *object(secrets_ns_, name, json)));
    } else {
      ASSERT_TRUE(local_->create(secrets(), *object(secrets_ns_, name, json)));
    }
  }

  // An EndpointSlice of service "svc" in the remote namespace with these addresses.
  void put_slice(const std::string& name, const std::vector<std::string>& addresses) {
    std::string eps;
    for (const auto& a : addresses) {
      eps += (eps.empty() ? "" : ",") +
             (R"({"addresses":[")" + a + R"("],"conditions":{"ready":true}})");
    }
    std::string json =
        R"({"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":")" +
        name + R"(","namespace":")" + remote_ns_ +
        R"(","labels":{"kubernetes.io/service-name":"svc"}},"addressType":"IPv4","ports":[{"name":"http","port":80,"protocol":"TCP"}],"endpoints":[)" +
        eps + "]}";
    auto existing = remote_admin_.get(endpoint_slices(), remote_ns_, name);
    if (existing) {
      json.insert(json.find(R"(,"labels")"),
                  R"(,"resourceVersion":")" + existing.value()->metadata.resource_version + "\"");
      ASSERT_TRUE(remote_admin_.update(endpoint_slices(), *object(remote_ns_, name, json)));
    } else {
      ASSERT_TRUE(remote_admin_.create(endpoint_slices(), *object(remote_ns_, name, json)));
    }
  }

  mesh::EndpointQuery query() const {
    mesh::EndpointQuery q;
    q.service = {remote_ns_, "svc"};
    q.port_name = "http";
    return q;
  }

  // Each remote cluster's EndpointSlices and Pods of the remote namespace.
  mesh::EndpointFeedOptions feed_options() const {
    mesh::EndpointFeedOptions o;
    o.endpoints.namespace_ = remote_ns_;
    o.pods.namespace_ = remote_ns_;
    return o;
  }

  std::shared_ptr<client::RestClient> local_;
  client::RestClient remote_admin_;
  std::string secrets_ns_;
  std::string remote_ns_;
  std::shared_ptr<informer::InformerFactory> factory_;
  std::unique_ptr<ClusterRegistry> registry_;
};

TEST_F(MulticlusterE2E,
       RemoteEndpointsAppearEmptyIsExplicitAndDeletingTheSecretRestoresTheRemoteWatchCount) {
  const long baseline = server_watches(remote_admin_, "discovery.k8s.io/v1/endpointslices");
  const long pods_baseline = server_watches(remote_admin_, "pods");
  put_slice("svc-a", {"10.1.0.1", "10.1.0.2"});
  put_secret("remotes", {{"west", inline_kubeconfig(server(), admin_user_fields())}});

  auto index = std::make_shared<mesh::EndpointIndex>();
  History history;
  auto watch = index->watch(query(), [&](const mesh::EndpointSnapshotPtr& s) { history.add(s); });
  registry_ = std::make_unique<ClusterRegistry>(local_, factory_, registry_options());
  mesh::ClusterEndpointFeeds feeds(index, *registry_, feed_options(), /*include_local=*/false);
  ASSERT_TRUE(registry_->start());
  ASSERT_TRUE(history.wait("west", {"10.1.0.1", "10.1.0.2"}))
      << ::testing::PrintToString(history.addresses("west"));
  EXPECT_TRUE(registry_->wait_for_sync(60s));
  EXPECT_EQ(
      wait_for_server_watches(remote_admin_, "discovery.k8s.io/v1/endpointslices", baseline + 1),
      baseline + 1);

  // Scaled to zero endpoints: an explicit empty shard for west, not an absent one.
  put_slice("svc-a", {});
  ASSERT_TRUE(history.wait("west", {})) << ::testing::PrintToString(history.addresses("west"));
  put_slice("svc-a", {"10.1.0.3"});
  ASSERT_TRUE(history.wait("west", {"10.1.0.3"}));
  // Every slice deleted: empty again.
  ASSERT_TRUE(remote_admin_.delete_(endpoint_slices(), remote_ns_, "svc-a"));
  ASSERT_TRUE(history.wait("west", {})) << ::testing::PrintToString(history.addresses("west"));

  // The Secret deleted: the shard leaves the index and the remote server's watches go back.
  ASSERT_TRUE(local_->delete_(secrets(), secrets_ns_, "remotes"));
  ASSERT_TRUE(history.wait("west", {"absent"}));
  EXPECT_TRUE(eventually([&] { return registry_->factory("west") == nullptr; }));
  EXPECT_EQ(wait_for_server_watches(remote_admin_, "discovery.k8s.io/v1/endpointslices", baseline),
            baseline);
  EXPECT_EQ(wait_for_server_watches(remote_admin_, "pods", pods_baseline), pods_baseline);
}

TEST_F(MulticlusterE2E,
       ExecPluginAndFilePathKubeconfigsAreRefusedByClusterAndFieldWhileTheOtherClusterWorks) {
  put_slice("svc-a", {"10.2.0.1"});
  std::string exec_user =
      "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/true\n";
  put_secret("remotes",
             {{"good", inline_kubeconfig(server(), admin_user_fields())},
              {"exec", inline_kubeconfig(server(), exec_user)},
              {"files", slurp(remote_dir() + "/kubeconfig")}});  // the launcher's: file paths
  auto index = std::make_shared<mesh::EndpointIndex>();
  History history;
  auto watch = index->watch(query(), [&](const mesh::EndpointSnapshotPtr& s) { history.add(s); });
  registry_ = std::make_unique<ClusterRegistry>(local_, factory_, registry_options());
  mesh::ClusterEndpointFeeds feeds(index, *registry_, feed_options(), /*include_local=*/false);
  ASSERT_TRUE(registry_->start());
  ASSERT_TRUE(history.wait("good", {"10.2.0.1"}));
  ASSERT_TRUE(registry_->wait_for_sync(60s));
  std::map<std::string, mesh::ClusterStatus> by_id;
  for (auto& s : registry_->clusters()) by_id[s.id] = s;
  EXPECT_EQ(by_id["good"].state, ClusterState::synced) << by_id["good"].reason;
  EXPECT_EQ(by_id["exec"].state, ClusterState::refused);
  EXPECT_NE(by_id["exec"].reason.find("key 'exec'"), std::string::npos) << by_id["exec"].reason;
  EXPECT_NE(by_id["exec"].reason.find("exec is refused"), std::string::npos)
      << by_id["exec"].reason;
  EXPECT_EQ(by_id["files"].state, ClusterState::refused);
  EXPECT_NE(by_id["files"].reason.find("key 'files'"), std::string::npos) << by_id["files"].reason;
  EXPECT_NE(by_id["files"].reason.find("certificate-authority is refused"), std::string::npos)
      << by_id["files"].reason;
  EXPECT_EQ(registry_->factory("exec"), nullptr);
  EXPECT_EQ(history.addresses("exec"), std::vector<std::string>{"absent"});
}

TEST_F(MulticlusterE2E, NewTokenForTheSameClusterNeverShowsItsShardMissingOrEmpty) {
  // A ServiceAccount on the remote allowed to read EndpointSlices and Pods, and two tokens of it.
  const auto& sa = dynamic("", "serviceaccounts", "ServiceAccount");
  ASSERT_TRUE(remote_admin_.create(
      sa,
      *object(remote_ns_, "mesh-reader",
              R"({"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"mesh-reader"}})")));
  const auto& roles = dynamic("rbac.authorization.k8s.io", "roles", "Role");
  const auto& bindings = dynamic("rbac.authorization.k8s.io", "rolebindings", "RoleBinding");
  ASSERT_TRUE(remote_admin_.create(
      roles,
      *object(
          remote_ns_, "mesh-reader",
          R"({"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"mesh-reader"},"rules":[{"apiGroups":["","discovery.k8s.io"],"resources":["pods","endpointslices"],"verbs":["get","list","watch"]}]})")));
  ASSERT_TRUE(remote_admin_.create(
      bindings,
      *object(
          remote_ns_, "mesh-reader",
          R"({"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"mesh-reader"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"mesh-reader"},"subjects":[{"kind":"ServiceAccount","name":"mesh-reader","namespace":")" +
              remote_ns_ + R"("}]})")));
  const auto& token_request = dynamic("", "serviceaccounts/mesh-reader/token", "TokenRequest");
  auto token = [&] {
    auto r = remote_admin_.create(
        token_request,
        *object(
            remote_ns_, "",
            R"({"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"expirationSeconds":3600}})"));
    if (!r) return std::string("<error: ") + r.error().to_string() + ">";
    const std::string& json = static_cast<const client::DynamicObject&>(*r.value()).json;
    auto at = json.find("\"token\":\"");
    if (at == std::string::npos) return std::string("<no token>");
    at += 9;
    return json.substr(at, json.find('"', at) - at);
  };
  const std::string token1 = token();
  const std::string token2 = token();
  ASSERT_EQ(token1.find('<'), std::string::npos) << token1.substr(0, 80);
  ASSERT_NE(token1, token2);

  put_slice("svc-a", {"10.3.0.1", "10.3.0.2"});
  put_secret("remotes", {{"west", inline_kubeconfig(server(), "    token: " + token1 + "\n")}});
  auto index = std::make_shared<mesh::EndpointIndex>();
  History history;
  auto watch = index->watch(query(), [&](const mesh::EndpointSnapshotPtr& s) { history.add(s); });
  registry_ = std::make_unique<ClusterRegistry>(local_, factory_, registry_options());
  mesh::ClusterEndpointFeeds feeds(index, *registry_, feed_options(), /*include_local=*/false);
  ASSERT_TRUE(registry_->start());
  ASSERT_TRUE(history.wait("west", {"10.3.0.1", "10.3.0.2"}));
  ASSERT_TRUE(registry_->wait_for_sync(60s));
  ASSERT_EQ(registry_->cluster("west")->generation, 1u);

  put_secret("remotes", {{"west", inline_kubeconfig(server(), "    token: " + token2 + "\n")}});
  ASSERT_TRUE(eventually(
      [&] {
        auto c = registry_->cluster("west");
        return c && c->generation == 2;
      },
      60s));
  // While the switch settles, a change made through the new client still arrives.
  put_slice("svc-a", {"10.3.0.1", "10.3.0.2", "10.3.0.3"});
  ASSERT_TRUE(history.wait("west", {"10.3.0.1", "10.3.0.2", "10.3.0.3"}));
  auto all = history.all("west");
  auto first_full =
      std::find(all.begin(), all.end(), std::vector<std::string>{"10.3.0.1", "10.3.0.2"});
  ASSERT_NE(first_full, all.end());
  for (auto it = first_full; it != all.end(); ++it) {
    EXPECT_NE(*it, std::vector<std::string>{"absent"}) << ::testing::PrintToString(all);
    EXPECT_FALSE(it->empty()) << ::testing::PrintToString(all);
  }
  EXPECT_EQ(registry_->clusters().back().state, ClusterState::synced);
  // The shard ends equal to what the server holds, content and resourceVersion: nothing the
  // old client still delivered after the switch landed (the new feed fenced it).
  auto on_server = remote_admin_.get(endpoint_slices(), remote_ns_, "svc-a");
  ASSERT_TRUE(on_server) << on_server.error().to_string();
  const std::map<std::string, std::string> want{
      {remote_ns_ + "/svc-a", on_server.value()->metadata.resource_version}};
  EXPECT_TRUE(eventually([&] { return index->keys("west").slices == want; }, 30s))
      << ::testing::PrintToString(index->keys("west").slices);
}

TEST_F(MulticlusterE2E, AThousandComponentBuildsLeaveOneSecretWatchAndAFailedFirstStartIsRetried) {
  auto restricted = restricted_config();
  ASSERT_TRUE(restricted.has_value()) << "the launcher's kubeconfig has a 'restricted' context";
  auto restricted_client = std::make_shared<client::RestClient>(*restricted, fast_client_options());
  auto restricted_factory = std::make_shared<informer::InformerFactory>(
      [c = restricted_client](const client::ResourceType& t, const std::string& ns) {
        return c->lister_watcher(t, ns);
      });
  const long baseline = server_watches(*local_, "secrets");
  ClusterRegistry registry(restricted_client, restricted_factory, registry_options());

  client::Status first = registry.start();
  ASSERT_FALSE(first);
  EXPECT_EQ(first.error().http_status, 403) << first.error().to_string();
  EXPECT_NE(first.error().message.find(secrets_ns_), std::string::npos) << first.error().message;
  EXPECT_EQ(restricted_factory->informer_count(), 0u);

  // The grant: the restricted user may read Secrets in that namespace.
  const auto& roles = dynamic("rbac.authorization.k8s.io", "roles", "Role");
  const auto& bindings = dynamic("rbac.authorization.k8s.io", "rolebindings", "RoleBinding");
  ASSERT_TRUE(local_->create(
      roles,
      *object(
          secrets_ns_, "secret-reader",
          R"({"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"secret-reader"},"rules":[{"apiGroups":[""],"resources":["secrets"],"verbs":["get","list","watch"]}]})")));
  ASSERT_TRUE(local_->create(
      bindings,
      *object(
          secrets_ns_, "secret-reader",
          R"({"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"secret-reader"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"secret-reader"},"subjects":[{"kind":"User","name":"restricted"}]})")));
  ASSERT_TRUE(
      eventually([&] { return static_cast<bool>(registry.start()); }, 30s));  // RBAC takes a moment

  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(registry.start());
    auto sub = registry.subscribe({});
    sub.close();
  }
  EXPECT_EQ(restricted_factory->informer_count(), 1u);
  EXPECT_EQ(wait_for_server_watches(*local_, "secrets", baseline + 1), baseline + 1);
  registry.shutdown();
  restricted_factory->shutdown();
  EXPECT_EQ(wait_for_server_watches(*local_, "secrets", baseline), baseline);
}

// kwatch clusters / kwatch endpoints as a platform engineer runs them (KUBECONFIG from the
// environment), against the same two servers.
struct KwatchRun {
  int code = -1;
  std::string out;
  std::string err;
};

KwatchRun kwatch(const std::vector<std::string>& args) {
  static int counter = 0;
  const std::string base =
      "/tmp/multicluster-kwatch-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  std::string cmd = std::string("'") + KWATCH_PATH + "'";
  for (const auto& a : args) cmd += " '" + a + "'";
  cmd += " >" + base + ".out 2>" + base + ".err </dev/null";
  const int rc = std::system(cmd.c_str());
  KwatchRun r{WIFEXITED(rc) ? WEXITSTATUS(rc) : 128, slurp(base + ".out"), slurp(base + ".err")};
  std::remove((base + ".out").c_str());
  std::remove((base + ".err").c_str());
  return r;
}

TEST_F(MulticlusterE2E, KwatchClustersAndEndpointsShowBothClustersAndTheExplicitEmptyShard) {
  put_slice("svc-a", {"10.4.0.1"});
  put_slice("svc-b", {});
  const std::string token = "tok-never-printed-4711";
  std::string exec_user =
      "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/true\n";
  put_secret("remotes",
             {{"west", inline_kubeconfig(server(), admin_user_fields())},
              {"sneaky", inline_kubeconfig(server(), exec_user + "    token: " + token + "\n")}});
  const std::vector<std::string> flags = {"--secret-namespace", secrets_ns_, "--timeout", "20"};

  auto with = [&](std::vector<std::string> args) {
    args.insert(args.end(), flags.begin(), flags.end());
    return kwatch(args);
  };
  KwatchRun clusters = with({"clusters", "--json"});
  EXPECT_EQ(clusters.code, 1) << "a refused cluster: not every cluster synced\n"
                              << clusters.out << clusters.err;
  EXPECT_NE(clusters.out.find(R"({"id":"local","local":true,"state":"synced")"), std::string::npos)
      << clusters.out;
  EXPECT_NE(clusters.out.find(R"("id":"west","local":false,"state":"synced")"), std::string::npos)
      << clusters.out;
  EXPECT_NE(clusters.out.find(R"("id":"sneaky","local":false,"state":"refused")"),
            std::string::npos)
      << clusters.out;
  EXPECT_NE(clusters.out.find("exec is refused"), std::string::npos) << clusters.out;
  EXPECT_EQ(clusters.out.find(token), std::string::npos);
  EXPECT_EQ(clusters.err.find(token), std::string::npos);

  KwatchRun table = with({"endpoints", "svc", "-n", remote_ns_, "--port", "http"});
  EXPECT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("service " + remote_ns_ + "/svc  port http"), std::string::npos)
      << table.out;
  EXPECT_NE(table.out.find("west     10.4.0.1"), std::string::npos) << table.out;

  ASSERT_TRUE(remote_admin_.delete_(endpoint_slices(), remote_ns_, "svc-a"));
  KwatchRun empty = with({"endpoints", "svc", "-n", remote_ns_, "--port", "http", "--json"});
  EXPECT_EQ(empty.code, 0) << empty.err;
  EXPECT_TRUE(std::regex_search(
      empty.out,
      std::regex(
          R"(\{"cluster":"west","freshness":\{"state":"fresh","age_seconds":[0-9]+\},"endpoints":\[\]\})")))
      << empty.out;
  EXPECT_TRUE(std::regex_search(
      clusters.out,
      std::regex(R"("id":"local","local":true,"state":"synced","freshness":\{"state":"fresh")")))
      << clusters.out;
}

// ---- convergence under churn, cut watches and compactions ----

std::uint64_t convergence_seed() {
  if (const char* s = std::getenv("KINFORMER_MULTICLUSTER_SEED"); s != nullptr && *s != '\0')
    return std::stoull(s);
  return std::random_device{}();
}

std::chrono::seconds convergence_duration() {
  if (const char* s = std::getenv("KINFORMER_MULTICLUSTER_DURATION"); s != nullptr && *s != '\0') {
    return std::chrono::seconds(std::stol(s));
  }
  return 20s;
}

// Address sets per cluster of a snapshot (a cluster absent or empty: no entry).
using Shards = std::map<std::string, std::set<std::string>>;
Shards shards_of(const mesh::EndpointSnapshot* s) {
  Shards out;
  if (s == nullptr) return out;
  for (const auto& [cluster, part] : s->clusters) {
    for (const auto& e : part->endpoints) out[cluster].insert(e.address);
  }
  return out;
}

// Random creates, endpoint changes, relabels and deletes of EndpointSlices (service "svc") and
// the Pods their endpoints name, in one namespace of one cluster.
class EndpointChurn {
 public:
  EndpointChurn(client::RestClient& client, std::string ns, std::string prefix, std::uint64_t seed)
      : client_(client), ns_(std::move(ns)), prefix_(std::move(prefix)), rng_(seed) {}

  void step() {
    const int op = static_cast<int>(rng_() % 6);
    const std::string pod = "p" + std::to_string(rng_() % 6);
    const std::string slice = prefix_ + "-s" + std::to_string(rng_() % 4);
    switch (op) {
      case 0:
      case 1:
        put_slice(slice);
        break;
      case 2:
        (void)client_.delete_(endpoint_slices(), ns_, slice);
        break;
      case 3:
      case 4:
        put_pod(pod);
        break;
      default:
        (void)client_.delete_(pods(), ns_, pod);
        break;
    }
    ++ops;
  }
  // A last write that leaves this cluster at least one endpoint and every Pod it may refer to,
  // so that the convergence check compares a state with endpoints whatever the seed left (seed
  // 1571189630 ended with none in both clusters).
  void leave_endpoints() {
    for (int i = 0; i < 6; ++i) put_pod("p" + std::to_string(i));
    put_slice(prefix_ + "-s0", /*min_endpoints=*/1);
    ops += 7;
  }
  std::uint64_t ops = 0;

 private:
  void put_slice(const std::string& name, int min_endpoints = 0) {
    std::string eps;
    // 0 endpoints is a state too
    const int n = std::max(min_endpoints, static_cast<int>(rng_() % 4));
    // Addresses are the slice's own (its number is the third octet): an address in two slices
    // is won by the slice that arrived last, an order a fresh list cannot tell, so the oracle
    // could not agree on which pod's labels it carries (the rule has its own unit test).
    for (int i = 0; i < n; ++i) {
      const std::string address = "10." + std::to_string(prefix_[0] == 'l' ? 10 : 20) + "." +
                                  name.substr(name.size() - 1) + "." +
                                  std::to_string(1 + rng_() % 12);
      eps += (eps.empty() ? "" : ",") +
             (R"({"addresses":[")" + address + R"("],"targetRef":{"kind":"Pod","namespace":")" +
              ns_ + R"(","name":"p)" + std::to_string(rng_() % 6) + R"("}})");
    }
    std::string json =
        R"({"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":")" +
        name + R"(","namespace":")" + ns_ +
        R"(","labels":{"kubernetes.io/service-name":"svc"}},"addressType":"IPv4","ports":[{"name":"http","port":80,"protocol":"TCP"}],"endpoints":[)" +
        eps + "]}";
    upsert(endpoint_slices(), name, json);
  }
  void put_pod(const std::string& name) {
    std::string json = R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")" + name +
                       R"(","namespace":")" + ns_ + R"(","labels":{"app":")" +
                       (rng_() % 2 == 0 ? "a" : "b") +
                       R"("}},"spec":{"containers":[{"name":"c","image":"example.invalid/c"}]}})";
    upsert(pods(), name, json);
  }
  void upsert(const client::ResourceType& type, const std::string& name, std::string json) {
    auto existing = client_.get(type, ns_, name);
    if (existing) {
      if (&type == &pods()) {
        // A Pod's spec is immutable: only its labels change.
        std::string app = json.find(R"("app":"a")") != std::string::npos ? "a" : "b";
        (void)client_.patch(type, ns_, name, client::PatchType::merge,
                            R"({"metadata":{"labels":{"app":")" + app + R"("}}})");
        return;
      }
      json.insert(json.find(R"(,"labels")"),
                  R"(,"resourceVersion":")" + existing.value()->metadata.resource_version + "\"");
      (void)client_.update(type, *object(ns_, name, json));
    } else {
      (void)client_.create(type, *object(ns_, name, json));
    }
  }
  client::RestClient& client_;
  std::string ns_;
  std::string prefix_;
  std::mt19937_64 rng_;
};

// What the two servers hold, through a fresh index (the same rules as the live pipeline).
Shards server_shards(client::RestClient& local, client::RestClient& remote, const std::string& ns,
                     const mesh::EndpointQuery& query) {
  mesh::EndpointIndex fresh;
  for (auto [cluster, client] :
       {std::pair<std::string, client::RestClient*>{"local", &local}, {"west", &remote}}) {
    auto slices = client->list_all(client::ResourceTraits<client::EndpointSlice>::type(), ns);
    auto listed_pods = client->list_all(client::ResourceTraits<client::Pod>::type(), ns);
    if (!slices || !listed_pods) return {{"<error>", {}}};
    for (const auto& o : listed_pods->items)
      fresh.upsert_pod(cluster, std::static_pointer_cast<const client::Pod>(o));
    for (const auto& o : slices->items)
      fresh.upsert_slice(cluster, std::static_pointer_cast<const client::EndpointSlice>(o));
  }
  auto snap = fresh.snapshot(query);
  return shards_of(snap.get());
}

TEST_F(MulticlusterE2E, SubscribersConvergeToBothServersAfterChurnCutWatchesAndCompactions) {
  const std::uint64_t seed = convergence_seed();
  const auto duration = convergence_duration();
  std::printf("multicluster convergence: seed=%" PRIu64
              " duration=%llds (rerun: KINFORMER_MULTICLUSTER_SEED=%" PRIu64 ")\n",
              seed, static_cast<long long>(duration.count()), seed);
  std::fflush(stdout);
  std::mt19937_64 seeds(seed);
  const std::uint64_t local_churn_seed = seeds(), remote_churn_seed = seeds(), proxy_seed = seeds(),
                      timeline_seed = seeds();

  // The service's namespace must have the same name in both clusters.
  ASSERT_TRUE(local_->create(
      namespaces(), *object("", remote_ns_,
                            R"({"apiVersion":"v1","kind":"Namespace","metadata":{"name":")" +
                                remote_ns_ + R"("}})")));
  // Both clusters are reached through fault proxies: the local client (Secrets and endpoints)
  // and the remote kubeconfig in the Secret.
  auto proxied = [](const std::string& server) {
    const auto host_start = server.find("://") + 3;
    const auto colon = server.rfind(':');
    return std::make_unique<TcpProxy>(
        server.substr(host_start, colon - host_start),
        static_cast<std::uint16_t>(std::stoi(server.substr(colon + 1))));
  };
  auto local_config = admin_config();
  auto local_proxy = proxied(local_config.server);
  if (local_config.tls_server_name.empty()) {
    local_config.tls_server_name =
        local_config.server.substr(8, local_config.server.rfind(':') - 8);
  }
  local_config.server = "https://127.0.0.1:" + std::to_string(local_proxy->port());
  auto remote_proxy = proxied(server());
  auto local_client = std::make_shared<client::RestClient>(local_config);
  informer::FactoryOptions fo;
  fo.reflector.backoff.max = 5s;
  auto factory = std::make_shared<informer::InformerFactory>(
      [c = local_client](const client::ResourceType& t, const std::string& ns) {
        return c->lister_watcher(t, ns);
      },
      fo);
  put_secret(
      "remotes",
      {{"west", inline_kubeconfig("https://127.0.0.1:" + std::to_string(remote_proxy->port()),
                                  admin_user_fields())}});
  auto options = registry_options();
  options.local_cluster_id = "local";
  options.remote_factory.reflector.backoff.max = 5s;
  mesh::ClusterRegistry registry(local_client, factory, options);
  auto index = std::make_shared<mesh::EndpointIndex>();
  mesh::ClusterEndpointFeeds feeds(index, registry, feed_options(), /*include_local=*/true);
  mesh::EndpointSubscriptions subs(index, factory->executor_ptr());
  mesh::EndpointQuery all = query();
  mesh::EndpointQuery only_a = query();
  only_a.selector = cache::LabelSelector::parse("app=a");
  struct Last {
    std::mutex mu;
    mesh::EndpointSnapshotPtr snapshot;
  } last_all, last_a;
  auto keep = [](Last& l) {
    return [&l](const mesh::EndpointSnapshotPtr& s) {
      std::lock_guard lock(l.mu);
      l.snapshot = s;
    };
  };
  auto sub_all = subs.subscribe(all, keep(last_all));
  auto sub_a = subs.subscribe(only_a, keep(last_a));
  ASSERT_TRUE(registry.start());
  ASSERT_TRUE(registry.wait_for_sync(60s));

  FaultSchedule schedule;
  schedule.seed = proxy_seed;
  local_proxy->start_faults(schedule);
  schedule.seed = proxy_seed + 1;
  remote_proxy->start_faults(schedule);

  EndpointChurn local_churn(*local_, remote_ns_, "local", local_churn_seed);
  EndpointChurn remote_churn(remote_admin_, remote_ns_, "west", remote_churn_seed);
  std::mt19937_64 timeline(timeline_seed);
  const auto compact_local_at =
      2s + std::chrono::milliseconds(timeline() % (duration.count() * 700));
  const auto compact_remote_at =
      2s + std::chrono::milliseconds(timeline() % (duration.count() * 700));
  bool local_compacted = false, remote_compacted = false;
  const auto started = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - started < duration) {
    local_churn.step();
    remote_churn.step();
    const auto elapsed = std::chrono::steady_clock::now() - started;
    if (!local_compacted && elapsed >= compact_local_at && launcher_available()) {
      EXPECT_EQ(launcher("compact --wait=false"), 0);
      local_compacted = true;
    }
    if (!remote_compacted && elapsed >= compact_remote_at) {
      EXPECT_EQ(run_launcher("compact --wait=false"), 0);
      remote_compacted = true;
    }
    std::this_thread::sleep_for(20ms);  // the churn's pace
  }
  local_churn.leave_endpoints();  // still through the faults
  remote_churn.leave_endpoints();
  local_proxy->stop_faults();
  remote_proxy->stop_faults();
  std::printf("multicluster convergence: %" PRIu64 " + %" PRIu64
              " operations, faults local %" PRIu64 " remote %" PRIu64
              ", compacted local %d remote %d\n",
              local_churn.ops, remote_churn.ops, local_proxy->faults_total(),
              remote_proxy->faults_total(), local_compacted, remote_compacted);

  Shards want_all, want_a, got_all, got_a;
  const bool converged = eventually(
      [&] {
        want_all = server_shards(*local_, remote_admin_, remote_ns_, all);
        want_a = server_shards(*local_, remote_admin_, remote_ns_, only_a);
        {
          std::lock_guard lock(last_all.mu);
          got_all = shards_of(last_all.snapshot.get());
        }
        {
          std::lock_guard lock(last_a.mu);
          got_a = shards_of(last_a.snapshot.get());
        }
        return want_all == got_all && want_a == got_a;
      },
      120s);
  EXPECT_TRUE(converged) << "seed " << seed << "\nall: server "
                         << ::testing::PrintToString(want_all) << "\n     subscriber "
                         << ::testing::PrintToString(got_all) << "\napp=a: server "
                         << ::testing::PrintToString(want_a) << "\n       subscriber "
                         << ::testing::PrintToString(got_a);
  EXPECT_FALSE(want_all.empty()) << "the churn left no endpoint at all: the check proved little";
  feeds.close();
  registry.shutdown();
  factory->shutdown();
  (void)local_->delete_(namespaces(), "", remote_ns_);
}

}  // namespace
}  // namespace kinformer::e2e
