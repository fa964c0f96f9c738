#pragma once
// EndpointIndex: service -> cluster shard -> endpoints, for mesh control planes. A data
// structure: it knows no informer. Feeding it from informers is EndpointFeed's job, delivering
// its snapshots to subscribers on their own strands EndpointSubscriptions'.

#include <chrono>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kinformer/cache/label_selector.h"
#include "kinformer/client/clock.h"
#include "kinformer/client/endpoint_slice.h"
#include "kinformer/client/endpoints.h"
#include "kinformer/client/object.h"
#include "kinformer/client/pod.h"
#include "kinformer/informer/handle.h"
#include "kinformer/informer/reflector.h"

namespace kinformer::mesh {

/// A Service by namespace and name.
struct ServiceRef {
  std::string namespace_;
  std::string name;
  auto operator<=>(const ServiceRef&) const = default;
  /// "namespace/name".
  [[nodiscard]] std::string key() const { return client::make_key(namespace_, name); }
};

/// One port of an endpoint (from the slice's or the Endpoints subset's port list).
struct EndpointPort {
  std::string name;  ///< "" for a Service's single unnamed port
  std::int32_t port = 0;
  std::string protocol;
  std::string app_protocol;
  bool operator==(const EndpointPort&) const = default;
};

/// One endpoint of a service in one cluster, as the last computation of its shard built it.
/// Value type.
struct Endpoint {
  std::string address;
  std::vector<EndpointPort> ports;  ///< sorted by name; unique names
  bool ready = true;                ///< unset in the slice: true (the API's rule)
  bool serving = true;              ///< unset: as ready
  bool terminating = false;         ///< unset: false
  std::string hostname;
  std::string node_name;
  std::string zone;
  std::optional<client::ObjectReference> target_ref;
  /// The backing Pod's labels, joined through targetRef from the same cluster's Pods; empty when
  /// the endpoint has no Pod target or the Pod is not (yet) known to the index.
  client::StringMap pod_labels;
  bool pod_known = false;  ///< the Pod named by targetRef was known when this was computed

  /// The port named `name`, or nullptr.
  [[nodiscard]] const EndpointPort* port(std::string_view name) const noexcept;
  bool operator==(const Endpoint&) const = default;
};

/// How fresh one cluster's input to the index is, asked when read: the feed that feeds the
/// cluster now answers (EndpointIndex::set_freshness; EndpointFeed sets its informers'). One per
/// cluster, shared by the cluster's parts in every snapshot, so an old snapshot says how fresh
/// the cluster is now. Thread-safe.
class ClusterFreshness {
 public:
  using Source = std::function<informer::Freshness()>;
  /// The source's answer now; resyncing with no contact while none is set.
  [[nodiscard]] informer::Freshness get() const;
  void set(Source source);

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const Source> source_;  // guarded by mu_; called outside it
};

/// The endpoints of one subset (service, port name, selector) in one cluster. Immutable once
/// published; shared between snapshots while the cluster's part does not change.
struct ClusterEndpoints {
  std::string cluster;
  /// How fresh the cluster's input is (freshness->get()): a mesh tells "no endpoints" from "I
  /// have not heard from this cluster for 95 s". Never null in the index's snapshots.
  std::shared_ptr<const ClusterFreshness> freshness;
  /// The index version at which this cluster's part of the subset last changed.
  std::uint64_t version = 0;
  /// Endpoints that have the subset's port and whose Pod labels match its selector, sorted by
  /// address, each address once. Empty is a state: the cluster has no such endpoint.
  std::vector<Endpoint> endpoints;
};

/// An immutable, versioned snapshot of one subset across every cluster.
/// Thread-safety: immutable; read from any thread. `merged` points into `clusters`, which the
/// snapshot owns: valid for as long as the snapshot (copying the snapshot keeps them valid).
struct EndpointSnapshot {
  ServiceRef service;
  std::string port_name;
  std::string
      selector;  ///< canonical text (cache::LabelSelector::to_string()); "" = every endpoint
  /// Strictly increasing per subset (index-wide counter): a newer snapshot has a larger version.
  std::uint64_t version = 0;
  /// Per cluster that has a shard for the service (possibly empty). A cluster absent here has
  /// never held a slice (or Endpoints) of the service, or was removed.
  std::map<std::string, std::shared_ptr<const ClusterEndpoints>, std::less<>> clusters;
  struct MergedEndpoint {
    const ClusterEndpoints* cluster = nullptr;
    const Endpoint* endpoint = nullptr;
  };
  /// Every cluster's endpoints, in cluster order then address order (not deduplicated across
  /// clusters: the same address in two clusters is two endpoints, e.g. on two networks).
  std::vector<MergedEndpoint> merged;
  /// The service had shards, and the index forgot them: no cluster held a slice (or Endpoints)
  /// of it for EndpointIndexOptions::forget_after. `clusters` is then empty. Set in the
  /// snapshots of watched subsets; an on-demand snapshot() of a forgotten service, like one of a
  /// service never seen, has no cluster and forgotten == false.
  bool forgotten = false;

  /// The cluster's part, or nullptr when the cluster has no shard for the service.
  [[nodiscard]] const ClusterEndpoints* cluster(std::string_view name) const;
};

using EndpointSnapshotPtr = std::shared_ptr<const EndpointSnapshot>;

/// What a subscriber asks for: a service, a port name, and optionally a selector over the
/// backing Pods' labels.
struct EndpointQuery {
  ServiceRef service;
  std::string port_name;
  std::optional<cache::LabelSelector> selector;  ///< nullopt (or an empty selector): every endpoint
};

/// Where a cluster's endpoints come from: discovery.k8s.io/v1 EndpointSlices, or core/v1
/// Endpoints for a cluster that does not serve discovery.k8s.io/v1.
enum class EndpointSource { slices, endpoints };

struct EndpointIndexOptions {
  /// How long a service with no slice (or Endpoints) in any cluster is kept before the index
  /// forgets its shards (an empty shard is a state subscribers see; a service deleted for good
  /// must not stay for ever). Forgetting happens at the first input call or sweep() after it.
  std::chrono::milliseconds forget_after{std::chrono::minutes(5)};
  /// Null: client::system_clock().
  client::ClockPtr clock;
};

/// Endpoints per service and per cluster shard, and snapshots per subset.
///
/// Rules (each guarded by a test in tests/mesh/endpoint_index_test.cc):
/// - Full replacement: every input that touches a service's slices (or Endpoints) in a cluster
///   recomputes that service's whole shard for that cluster from the inputs the index now
///   holds; nothing from an earlier computation survives.
/// - Cross-slice dedupe: an address in two slices of one service in one cluster counts once; the
///   slice written to the index last wins (arrival order, never a resourceVersion comparison).
/// - Empty is a state: a shard whose slices were all removed (or hold no endpoint) stays, empty,
///   and reaches the subset's snapshot as an explicit empty ClusterEndpoints.
/// - Pods: a Pod's labels are joined to endpoints through targetRef. A Pod change recomputes
///   every subset of every service whose shard references the Pod, when its selector matches
///   the old labels or the new ones; when the old labels are not known (the Pod was not in the
///   index), every subset of those services is recomputed.
/// - remove_cluster() removes every shard of the cluster and notifies every subset of every
///   affected service.
/// - Forgetting: a service with no slice (or Endpoints) in any cluster for forget_after loses
///   its shards in every cluster; its watched subsets get a snapshot without clusters, marked
///   forgotten. Memory is bounded by the services that exist, not by those ever seen.
/// - Fencing: fence(cluster, epoch) drops, from then on, input for that cluster from an earlier
///   epoch (the old client's feed after a client switch: its late deliveries), counted in
///   dropped_writes(), so a switch can never bring back older content.
/// Subsets are tracked (and notified) while at least one Watch on them is open; snapshot()
/// computes an untracked subset on demand.
///
/// Notification: after an input call changed subsets, their watches' callbacks run on the
/// calling thread, after the index's lock is released, with the new snapshot. Callbacks of
/// concurrent input calls may run concurrently and out of order: a receiver keeps the snapshot
/// with the highest version. Callbacks must be fast and must not block (store the snapshot and
/// wake a strand: EndpointFeed does); they may call back into the index.
///
/// Lifetime: Watches may outlive the index (closing is then a no-op). Snapshots are shared and
/// outlive everything.
/// Thread-safety: thread-safe; every public method may be called concurrently from any thread,
/// including from inside a watch callback. One mutex serialises inputs and snapshot building.
class EndpointIndex {
  class State;        // mesh/src/endpoint_index_state.h
  class SubsetWatch;  // a Watch's Closable

 public:
  /// Called with every new snapshot of a watched subset.
  using Callback = std::function<void(const EndpointSnapshotPtr&)>;

  /// The RAII handle of one watch on one subset (a Handle): destroying or closing it stops that
  /// watch (idempotent). A callback already taken by a concurrent input call may still run once
  /// after close() returns: its captures must hold shared ownership of what it uses.
  /// Thread-safety: close() may be called from any thread, also from inside the callback; moving
  /// must not race with other calls on the same object.
  class [[nodiscard]] Watch : public informer::Handle {
   public:
    Watch() = default;

   private:
    friend class EndpointIndex;
    explicit Watch(std::shared_ptr<informer::Closable> watch) : Handle(std::move(watch)) {}
  };

  explicit EndpointIndex(EndpointIndexOptions options = {});
  ~EndpointIndex();
  EndpointIndex(const EndpointIndex&) = delete;
  EndpointIndex& operator=(const EndpointIndex&) = delete;

  /// Declares a cluster's endpoint source. Optional: the first input for a cluster declares it.
  /// Returns false (and changes nothing) when the cluster already has the other source.
  bool set_source(const std::string& cluster, EndpointSource source);

  /// Raises the fence of `cluster` to `epoch` (never lowers it): input for the cluster with an
  /// earlier epoch is dropped from now on. An epoch names one client of a cluster
  /// (RemoteCluster::epoch, unique in the process and growing); feeds of one client share it,
  /// so two components feeding one index from the same client do not fence each other. The
  /// fence survives remove_cluster() (a late write of a removed client cannot bring the cluster
  /// back; a re-added cluster has a newer client).
  void fence(const std::string& cluster, std::uint64_t epoch);
  /// Sets who answers how fresh `cluster`'s input is (ClusterEndpoints::freshness), unless
  /// `epoch` is below the cluster's fence (false then).
  bool set_freshness(const std::string& cluster, std::uint64_t epoch,
                     ClusterFreshness::Source source);

  // Input calls. `epoch`: the client the input comes from (0 for input that names none: taken
  // while the cluster was never fenced). Each returns false when the input was not taken:
  // dropped by the fence, or (upsert_slice, upsert_endpoints) the cluster has the other source.

  /// Adds or replaces an EndpointSlice (keyed by namespace/name) in `cluster` and recomputes the
  /// shards of its service (label kubernetes.io/service-name) and, if the label changed, of its
  /// previous service. A slice without the label is held but belongs to no service.
  bool upsert_slice(const std::string& cluster, std::shared_ptr<const client::EndpointSlice> slice,
                    std::uint64_t epoch = 0);
  /// Removes the slice with `key` ("namespace/name") and recomputes its service's shard (which
  /// becomes empty, not absent, when it was the last slice). Unknown keys are a no-op.
  bool remove_slice(const std::string& cluster, std::string_view key, std::uint64_t epoch = 0);
  /// Adds or replaces a core/v1 Endpoints (its namespace/name is the service's) and recomputes
  /// that shard.
  bool upsert_endpoints(const std::string& cluster,
                        std::shared_ptr<const client::Endpoints> endpoints,
                        std::uint64_t epoch = 0);
  /// Removes the Endpoints with `key`; its shard becomes empty.
  bool remove_endpoints(const std::string& cluster, std::string_view key, std::uint64_t epoch = 0);
  /// Adds or replaces a Pod (for the targetRef join) and recomputes the subsets it can affect.
  bool upsert_pod(const std::string& cluster, std::shared_ptr<const client::Pod> pod,
                  std::uint64_t epoch = 0);
  /// Forgets a Pod: endpoints naming it keep no labels.
  bool remove_pod(const std::string& cluster, std::string_view key, std::uint64_t epoch = 0);
  /// Forgets everything of `cluster` (slices, Endpoints, Pods, shards, its source; not its
  /// fence) and notifies every watched subset of every service that had a shard there.
  bool remove_cluster(const std::string& cluster, std::uint64_t epoch = 0);
  /// Forgets the services unused for forget_after (input calls do it too). Returns how many.
  std::size_t sweep();

  /// Watches one subset: `callback` receives every later snapshot of it. Returns the handle;
  /// `current` (if not null) receives the snapshot at registration, taken atomically with it (no
  /// snapshot is missed between the two).
  Watch watch(const EndpointQuery& query, Callback callback,
              EndpointSnapshotPtr* current = nullptr);
  /// The current snapshot of a subset (computed on demand when nobody watches it).
  [[nodiscard]] EndpointSnapshotPtr snapshot(const EndpointQuery& query) const;

  /// Watched subsets (for audits and tests).
  [[nodiscard]] std::size_t subset_count() const;
  /// The clusters the index holds input for.
  [[nodiscard]] std::vector<std::string> clusters() const;
  /// The inputs the index holds for one cluster: key ("namespace/name") -> resourceVersion.
  struct ClusterKeys {
    std::map<std::string, std::string> slices;
    std::map<std::string, std::string> endpoints;
    std::map<std::string, std::string> pods;
  };
  [[nodiscard]] ClusterKeys keys(const std::string& cluster) const;
  /// Services the index holds shards for, in any cluster (for audits and tests).
  [[nodiscard]] std::size_t service_count() const;
  /// Input calls dropped by the fence (from an earlier epoch than the cluster's fence).
  [[nodiscard]] std::uint64_t dropped_writes() const;
  /// The index-wide version counter: the version of the newest snapshot or shard computation.
  [[nodiscard]] std::uint64_t version() const;

 private:
  // One input call: the fence, `apply` under the lock, forgetting; callbacks after the lock.
  template <typename Apply>
  bool input(std::string_view cluster, std::uint64_t epoch, Apply&& apply);

  std::shared_ptr<State> state_;
};

using EndpointIndexPtr = std::shared_ptr<EndpointIndex>;

}  // namespace kinformer::mesh
