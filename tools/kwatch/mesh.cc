// kwatch clusters and kwatch endpoints: the ClusterRegistry and the EndpointIndex as a user runs
// them (this cluster from --kubeconfig/--context, remote clusters from kubeconfig Secrets).

#include <csignal>
#include <ctime>
#include <iostream>
#include <memory>

#include "commands.h"
#include "kinformer/cache/label_selector.h"
#include "kinformer/mesh/cluster_endpoint_feeds.h"
#include "kinformer/mesh/cluster_registry.h"
#include "mesh_report.h"
#include "watch_audit.h"

namespace kinformer::tools {
namespace {

using namespace std::chrono_literals;

// The local cluster's client and factory, and the registry on them.
struct Mesh {
  std::shared_ptr<client::RestClient> client;
  std::shared_ptr<informer::InformerFactory> factory;
  std::unique_ptr<mesh::ClusterRegistry> registry;

  ~Mesh() {
    if (registry) registry->shutdown();
    if (factory) factory->shutdown();
  }
};

// Builds and starts the registry; nullopt-like (null registry) after logging why it failed.
std::unique_ptr<Mesh> start_mesh(const CommonOptions& common, const RegistryFlags& flags) {
  auto mesh = std::make_unique<Mesh>();
  const auto config = load_config(common);
  client::RestClientOptions client_options;
  client_options.user_agent = "kwatch/0.1 (kinformer/0.1)";
  mesh->client = std::make_shared<client::RestClient>(config, client_options);
  mesh->factory = std::make_shared<informer::InformerFactory>(
      [c = mesh->client](const client::ResourceType& t, const std::string& ns) {
        return c->lister_watcher(t, ns);
      });
  mesh::ClusterRegistryOptions o;
  o.secret_namespace = flags.secret_namespace;
  o.label_selector = flags.secret_selector;
  o.local_cluster_id = flags.local_id;
  o.sync_timeout = std::chrono::seconds(flags.timeout_seconds);
  o.start_timeout = std::chrono::seconds(flags.timeout_seconds);
  o.remote_client.user_agent = client_options.user_agent;
  mesh->registry = std::make_unique<mesh::ClusterRegistry>(mesh->client, mesh->factory, o);
  if (auto started = mesh->registry->start(); !started) {
    log("error", describe_error(started.error(), config.server),
        {{"namespace", flags.secret_namespace}});
    return nullptr;
  }
  // Each remote settles (synced or its sync timeout) on its own; a little slack on top.
  if (!mesh->registry->wait_for_sync(std::chrono::seconds(flags.timeout_seconds) + 5s)) {
    log("warn", "not every cluster settled in time",
        {{"timeout_seconds", std::to_string(flags.timeout_seconds)}});
  }
  return mesh;
}

ClusterRow row_of(const mesh::ClusterStatus& status, const Mesh& mesh) {
  ClusterRow row{.status = status};
  std::shared_ptr<client::RestClient> client = mesh.client;
  if (!status.local) {
    auto remote = mesh.registry->cluster(status.id);
    client = remote ? remote->client : nullptr;
  }
  if (auto f = mesh.registry->factory(status.id)) row.process_watches = f->informer_count();
  if (!client) {
    row.server_watches_error = "no client";
    return row;
  }
  auto metrics = client->get_raw("/metrics");
  if (!metrics) {
    row.server_watches_error = "/metrics: " + metrics.error().to_string();
  } else if (metrics->status != 200) {
    row.server_watches_error = "/metrics: HTTP " + std::to_string(metrics->status);
  } else {
    row.server_watches = audit_watches(metrics->body).total();
  }
  return row;
}

}  // namespace

int run_clusters(const ClustersOptions& options) {
  auto mesh = start_mesh(options.common, options.registry);
  if (!mesh) return kExitError;
  std::vector<ClusterRow> rows;
  bool all_synced = true;
  for (const auto& status : mesh->registry->clusters()) {
    all_synced = all_synced && status.state == mesh::ClusterState::synced;
    rows.push_back(row_of(status, *mesh));
  }
  {
    std::lock_guard lock(stdout_mutex());
    std::cout << (options.json ? render_clusters_json(rows) : render_clusters_table(rows));
    std::cout.flush();
  }
  return all_synced ? kExitOk : kExitCheckFailed;
}

int run_endpoints(const EndpointsOptions& options) {
  mesh::EndpointQuery query;
  query.service = {options.namespace_, options.service};
  query.port_name = options.port;
  if (!options.subset.empty()) query.selector = cache::LabelSelector::parse(options.subset);

  auto mesh = start_mesh(options.common, options.registry);
  if (!mesh) return kExitError;
  auto index = std::make_shared<mesh::EndpointIndex>();
  mesh::EndpointFeedOptions feed_options;
  feed_options.endpoints.namespace_ = options.namespace_;
  feed_options.pods.namespace_ = options.namespace_;
  feed_options.name = "kwatch-endpoints";

  // The newest snapshot, handed from index callbacks (any thread) to the main thread.
  std::mutex mu;
  mesh::EndpointSnapshotPtr latest;
  auto keep = [&](const mesh::EndpointSnapshotPtr& s) {
    std::lock_guard lock(mu);
    if (!latest || s->version > latest->version) latest = s;
  };
  mesh::EndpointSnapshotPtr current;
  auto watch = index->watch(query, keep, &current);
  keep(current);
  mesh::ClusterEndpointFeeds feeds(index, *mesh->registry, feed_options);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(options.registry.timeout_seconds);
  while (!feeds.has_synced() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(50ms);  // polling the feeds' sync flags, not a fixed wait
  }
  if (!feeds.has_synced()) log("warn", "not every cluster's endpoint caches synced in time");

  auto print = [&](const mesh::EndpointSnapshot& s) {
    std::lock_guard lock(stdout_mutex());
    std::cout << (options.json ? render_endpoints_json(s) : render_endpoints_table(s));
    std::cout.flush();
  };
  std::uint64_t printed = 0;
  auto print_newest = [&] {
    mesh::EndpointSnapshotPtr s;
    {
      std::lock_guard lock(mu);
      s = latest;
    }
    if (s && (printed == 0 || s->version > printed)) {
      print(*s);
      printed = std::max<std::uint64_t>(s->version, 1);
    }
  };
  print_newest();
  if (!options.watch) return kExitOk;

  const sigset_t signals = kwatch_signals();
  while (true) {
    timespec wait{0, 100'000'000};
    const int sig = sigtimedwait(&signals, nullptr, &wait);
    if (sig == SIGINT || sig == SIGTERM) {
      log("info", "stopping", {{"signal", sig == SIGINT ? "SIGINT" : "SIGTERM"}});
      break;
    }
    print_newest();
  }
  return kExitOk;
}

}  // namespace kinformer::tools
