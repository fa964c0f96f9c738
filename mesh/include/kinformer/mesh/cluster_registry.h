#pragma once
// ClusterRegistry: remote clusters from kubeconfig Secrets (mesh/cluster-registry.md).

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kinformer/client/cluster_config.h"
#include "kinformer/client/log.h"
#include "kinformer/client/rest_client.h"
#include "kinformer/client/result.h"
#include "kinformer/informer/handle.h"
#include "kinformer/informer/informer_factory.h"

namespace kinformer::mesh {

/// syncing: the client is built, its informers have not all synced (with no informer: the
/// GET /version probe has not answered yet), no error yet.
/// unreachable: the last request failed (connection, TLS, 401/403, a probe's non-2xx), also
/// after the cluster had synced: retried with the informers' backoff. timed_out: not synced within
/// sync_timeout (still retried; counts as settled for has_synced()). refused: the kubeconfig was
/// refused or is malformed; nothing is built until the Secret changes (a cluster that had a working
/// kubeconfig keeps using it and shows refused with both reasons).
enum class ClusterState { syncing, synced, timed_out, refused, unreachable };
[[nodiscard]] std::string_view to_string(ClusterState state) noexcept;

/// One remote cluster as built from one kubeconfig. Immutable: a changed kubeconfig for the same
/// ID is a new RemoteCluster (generation + 1) with its own client and factory.
struct RemoteCluster {
  std::string id;
  std::string secret;  ///< "namespace/name" of the Secret holding the kubeconfig
  std::uint64_t generation = 0;
  /// Unique in the process and growing with every client built: a newer client of a cluster
  /// (also of a cluster removed and added again) has a larger epoch. EndpointIndex fences by it.
  std::uint64_t epoch = 0;
  std::shared_ptr<client::RestClient> client;
  std::shared_ptr<informer::InformerFactory> factory;
};
using RemoteClusterPtr = std::shared_ptr<const RemoteCluster>;

/// What the registry tells a component about remote clusters. Every call of every handler runs
/// on the registry's worker thread, one at a time, in order per cluster; a handler may call the
/// registry's accessors but must not block for long (it delays the other clusters' events).
/// - added: a new cluster ID; create informers on cluster->factory (it is started). A new
///   subscription first gets added for every cluster already known, then synced for each whose
///   current client has synced.
/// - updated: make-before-break. `now` is a new client for the same ID, whose factory already
///   runs — and has synced, or hit sync_timeout — every informer `before`'s factory had. Move
///   registrations to now->factory; after the call returns, before's factory is shut down.
///   After a sync timeout `now` may not have synced yet: wait for `synced` before trusting its
///   caches to be complete (ClusterEndpointFeeds prunes only then).
/// - removed: the ID is gone (its key or Secret deleted); after the call returns, its factory
///   is shut down. A kubeconfig edited into something refused keeps the current client.
/// - synced: the cluster's current client (this generation) has synced every informer it has —
///   or, with none, answered GET /version — for the first time. Follows added or updated.
/// Handlers must not call shutdown() (it throws std::logic_error there).
struct ClusterHandler {
  std::function<void(const RemoteClusterPtr& cluster)> added;
  std::function<void(const RemoteClusterPtr& now, const RemoteClusterPtr& before)> updated;
  std::function<void(const RemoteClusterPtr& cluster)> synced;
  std::function<void(const RemoteClusterPtr& before)> removed;
};

/// What clusters() reports per cluster ID (the local cluster first).
struct ClusterStatus {
  std::string id;
  bool local = false;
  ClusterState state = ClusterState::syncing;
  /// Why it is not synced: the refused field, the last error; empty when synced. Never a
  /// credential.
  std::string reason;
  std::string secret;  ///< the Secret it came from; empty for the local cluster
  std::uint64_t generation = 0;
  std::size_t informers = 0;
  /// The stalest view among the cluster's informers (InformerFactory::freshness()): stale, with
  /// its age, when one has heard nothing from the server past its idle deadline. Resyncing with
  /// no contact for a cluster without informers or without a client.
  informer::Freshness freshness;
};

struct ClusterRegistryOptions {
  /// The namespace whose Secrets hold remote kubeconfigs (required).
  std::string secret_namespace;
  /// Selects those Secrets (Istio's: "istio/multiCluster=true").
  std::string label_selector = "kinformer.io/multicluster=true";
  /// The local cluster's ID; a Secret key with this ID is ignored (logged).
  std::string local_cluster_id = "local";
  /// What remote kubeconfigs may use; default: inline data and tokens only.
  client::KubeconfigPolicy kubeconfig_policy;
  /// How long a remote's informers may take to sync before the cluster counts as timed out
  /// (has_synced() stops waiting for it; an update switches to the new client anyway).
  std::chrono::milliseconds sync_timeout{30'000};
  /// How long start() waits for the Secret informer's initial list.
  std::chrono::milliseconds start_timeout{30'000};
  /// Options of every remote cluster's RestClient and InformerFactory (log and registry are
  /// set by the registry when left empty). The remote factories share one handler pool
  /// (FactoryOptions::shared_executor): the registry's own, sized by remote_factory.executor and
  /// shut down after the last remote factory, unless remote_factory.shared_executor names one.
  /// The remote clients share one IoRuntime (IoRuntime::default_threads()), unless
  /// remote_client.runtime names one.
  client::RestClientOptions remote_client;
  informer::FactoryOptions remote_factory;
  /// Null: the local factory's registry.
  std::shared_ptr<informer::MetricsRegistry> registry;
  /// Null: stderr (logfmt).
  client::LogSink log;
};

class ClusterRegistry;
namespace detail {
class ClusterStore;
}

/// Keeps one ClusterHandler subscribed (a Handle); closing it (or destroying it) unsubscribes
/// exactly that handler — never the registry, never a cluster. close() waits for a running call
/// of that handler unless called from inside it. May outlive the registry; active() is false
/// once closed or once the registry shut down.
class [[nodiscard]] ClusterSubscription : public informer::Handle {
 public:
  ClusterSubscription() = default;
  struct State;  ///< the registry's; opaque here

 private:
  friend class detail::ClusterStore;
  explicit ClusterSubscription(std::shared_ptr<State> state);
};

/// Watches the Secrets of one namespace selected by a label; each data key is a cluster ID and
/// its value a kubeconfig. For each remote cluster it builds a RestClient and an InformerFactory
/// and tells subscribers (ClusterHandler). Components reach a remote's shared informers through
/// factory(id), so N components still mean one watch per key per cluster.
///
/// Inside (mesh/src): a SecretSource turns Secrets into the wanted clusters, one
/// RemoteClusterLife per cluster builds, probes, syncs and replaces its client
/// (make-before-break), and a ClusterStore tells subscribers. One worker thread runs them,
/// woken by Secret events, subscriptions and informers that synced (never a poll), and by the
/// deadlines of sync timeouts and probe retries; blocking calls (GET /version probes, shutting
/// down a replaced client) run on a second thread, so a blackholed remote delays no other
/// cluster's events (probes take turns there; a first probe goes before retries).
///
/// Lifetime: one registry per process, owned by a long-lived owner (next to the local factory);
/// components call start() and subscribe() as often as they are built — start() runs behind a
/// OnceGuard (one Secret watch however often it is called; a failed start is returned to its
/// caller and retried by the next), and closing a subscription stops nothing.
/// Thread-safety: thread-safe. Handlers run on the registry's worker thread.
class ClusterRegistry {
 public:
  /// The Secret informer lives in `local_factory` (shared with its other users). Throws
  /// client::ConfigError for an empty secret_namespace or an invalid label selector.
  ClusterRegistry(std::shared_ptr<client::RestClient> local_client,
                  std::shared_ptr<informer::InformerFactory> local_factory,
                  ClusterRegistryOptions options);
  /// shutdown().
  // NOLINTNEXTLINE(bugprone-exception-escape): bad_alloc, or shutdown() on its worker: terminate
  ~ClusterRegistry();
  ClusterRegistry(const ClusterRegistry&) = delete;
  ClusterRegistry& operator=(const ClusterRegistry&) = delete;

  /// Once: checks that the Secrets can be listed (one request; a 403 is returned naming the
  /// namespace), creates the Secret informer on the local factory, starts the factory and waits
  /// for that informer's initial list (start_timeout). A failure creates no second watch: the
  /// next call checks again and reuses the informer.
  client::Status start();
  [[nodiscard]] bool started() const;

  /// The handler first gets `added` for every cluster already known, and `synced` for each
  /// whose current client has synced (on the worker thread).
  ClusterSubscription subscribe(ClusterHandler handler);

  /// The factory for a cluster ID: the local factory for local_cluster_id, the active factory of
  /// a remote, null for an unknown or refused ID. A remote factory is shut down when its
  /// cluster is updated or removed: components that create informers should do so from a
  /// ClusterHandler (subscribe()), which is told when to move.
  [[nodiscard]] std::shared_ptr<informer::InformerFactory> factory(std::string_view id) const;
  [[nodiscard]] RemoteClusterPtr cluster(std::string_view id) const;
  /// Local first, then remotes by ID.
  [[nodiscard]] std::vector<ClusterStatus> clusters() const;
  /// Started, the local factory's informers synced, and every remote cluster synced, timed out
  /// or refused.
  [[nodiscard]] bool has_synced() const;
  /// Waits (real time) for has_synced(); false on timeout.
  bool wait_for_sync(std::chrono::milliseconds timeout) const;
  [[nodiscard]] const std::string& local_cluster_id() const noexcept;

  /// Stops the worker, tells subscribers nothing more, shuts every remote factory down (bounded
  /// as InformerFactory::shutdown is, plus a probe in flight: 5 s) and closes the Secret
  /// handler. The local factory is not shut down (it is not the registry's). Idempotent;
  /// concurrent calls wait for the first. Throws std::logic_error from a ClusterHandler.
  void shutdown();

 private:
  class Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace kinformer::mesh
