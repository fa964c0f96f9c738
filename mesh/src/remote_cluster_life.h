#pragma once
// RemoteClusterLife: one remote cluster's life in the ClusterRegistry: build a client from a
// kubeconfig, probe it while nothing runs on it, tell when it synced, and replace it
// make-before-break when its kubeconfig changes.

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kinformer/informer/metrics_registry.h"

#include "kinformer/mesh/cluster_registry.h"
#include "secret_source.h"

namespace kinformer::mesh::detail {

using SteadyClock = std::chrono::steady_clock;

/// The registry's metric families (registered once per registry).
struct RegistryMetrics {
  explicit RegistryMetrics(informer::MetricsRegistry& r);
  informer::GaugeFamily& clusters;         ///< by state
  informer::CounterFamily& sync_timeouts;  ///< by cluster
  informer::CounterFamily& refusals;       ///< by field
  informer::CounterFamily& changes;        ///< by kind
};

/// One change to tell subscribers, in order.
struct ClusterEvent {
  enum class Kind { added, updated, synced, removed };
  Kind kind = Kind::added;
  RemoteClusterPtr now;     ///< added, updated, synced: the client to use; removed: null
  RemoteClusterPtr before;  ///< updated: the replaced client; removed: the removed one
};
[[nodiscard]] const char* to_string(ClusterEvent::Kind kind) noexcept;

/// How every remote cluster is built.
struct RemoteSettings {
  client::KubeconfigPolicy policy;
  client::RestClientOptions client;
  informer::FactoryOptions factory;
  std::chrono::milliseconds sync_timeout{30'000};
  /// Registered on every factory built (InformerFactory::on_informer_synced): wakes the worker.
  std::function<void()> on_synced;
};

/// A client built from a kubeconfig, or why it was refused.
struct Built {
  RemoteClusterPtr cluster;  ///< null when refused
  std::string refused;       ///< the reason, naming the Secret and key; never a credential
  std::string field;         ///< the refused field; "invalid" for a malformed kubeconfig
};

/// Builds a client and a started factory (no lock held: parsing and TLS set-up take time).
[[nodiscard]] Built build_remote(const std::string& id, const WantedCluster& wanted,
                                 std::uint64_t generation, const RemoteSettings& settings);

/// Not thread-safe: the registry's worker changes it under the registry's lock; readers hold
/// that lock too. The clients it holds are shared with subscribers; the ones it drops go to
/// `retire` (shut down by the registry after subscribers were told).
class RemoteClusterLife {
 public:
  RemoteClusterLife(std::string id, std::chrono::milliseconds sync_timeout,
                    const client::Logger& log, RegistryMetrics& metrics);

  /// The kubeconfig last applied, built or refused (an unchanged one is not built again).
  [[nodiscard]] const std::string& kubeconfig() const noexcept { return kubeconfig_; }
  [[nodiscard]] std::uint64_t next_generation() const noexcept { return generation_ + 1; }
  /// An ID moved to another Secret with the same kubeconfig: no rebuild.
  void set_secret(std::string secret) { secret_ = std::move(secret); }

  /// Applies a kubeconfig's client. A first one becomes active (`added`); a later one is
  /// pending, running every informer of the active one, until it syncs (settle()). A refused
  /// one keeps the working client (a typo must not become an outage) and drops a pending one.
  std::optional<ClusterEvent> apply(const WantedCluster& wanted, Built built,
                                    std::vector<RemoteClusterPtr>& retire);
  /// Moves on at `now`: switches to a pending client that synced or passed the sync timeout
  /// (`updated`), tells `synced` once per client, marks the sync timeout of the active one.
  std::vector<ClusterEvent> settle(SteadyClock::time_point now,
                                   std::vector<RemoteClusterPtr>& retire);
  /// A client to GET /version now (its factory runs no informer: nothing else says whether it
  /// is reachable): `retry` when this client's earlier probe failed.
  struct ProbeDue {
    RemoteClusterPtr cluster;
    bool retry = false;
  };
  std::optional<ProbeDue> probe_due(SteadyClock::time_point now);
  /// The probe's answer for `generation` ("" when reachable).
  void probe_done(std::uint64_t generation, std::string error, SteadyClock::time_point now);
  /// When settle() or probe_due() next has work that no signal announces (a sync timeout, a
  /// probe retry); time_point::max() when none.
  [[nodiscard]] SteadyClock::time_point next_deadline() const;

  /// Synced, timed out or refused: has_synced() waits for no more. Sticky per client: a first
  /// refused kubeconfig replaced by a valid one is a new client, not settled until it is.
  [[nodiscard]] bool settled() const noexcept { return settled_; }
  [[nodiscard]] const RemoteClusterPtr& active() const noexcept { return active_; }
  [[nodiscard]] ClusterStatus status() const;
  /// The clients to shut down when the cluster goes (the life is dropped after).
  [[nodiscard]] std::vector<RemoteClusterPtr> release();

 private:
  [[nodiscard]] bool synced(const RemoteCluster& cluster) const;
  void copy_informers(const RemoteCluster& from, const RemoteCluster& to) const;

  const std::string id_;
  const client::Logger log_;
  RegistryMetrics& metrics_;
  const std::chrono::milliseconds sync_timeout_;
  std::string secret_;
  std::string kubeconfig_;
  std::uint64_t generation_ = 0;
  RemoteClusterPtr active_;   // what subscribers use; null while the first kubeconfig is refused
  RemoteClusterPtr pending_;  // make-before-break: the new client, syncing
  SteadyClock::time_point active_since_{};
  SteadyClock::time_point pending_since_{};
  bool timed_out_ = false;         // active_ did not sync within sync_timeout
  bool settled_ = false;           // active_ synced or timed out, or refused (per client)
  std::uint64_t synced_told_ = 0;  // the generation whose `synced` was told
  std::string refused_;            // why the latest kubeconfig was refused; empty otherwise
  // Reachability of active_ while it runs no informer (GET /version).
  std::uint64_t probed_ = 0;  // generation of the last answer
  bool probe_ok_ = false;
  std::string probe_error_;
  bool probe_queued_ = false;
  SteadyClock::time_point next_probe_{};
};

}  // namespace kinformer::mesh::detail
