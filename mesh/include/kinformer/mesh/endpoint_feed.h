#pragma once
// EndpointFeed: feeds one cluster's EndpointSlice (or core/v1 Endpoints) and Pod informers into
// an EndpointIndex.

#include <memory>
#include <string>

#include "kinformer/informer/informer_factory.h"
#include "kinformer/informer/registration.h"
#include "kinformer/mesh/endpoint_index.h"

namespace kinformer::mesh {

/// Which informers an EndpointFeed uses, and how they are keyed.
struct EndpointFeedOptions {
  /// slices: discovery.k8s.io/v1 EndpointSlices; endpoints: core/v1 Endpoints, for a cluster
  /// that does not serve discovery.k8s.io/v1.
  EndpointSource source = EndpointSource::slices;
  /// Key of the EndpointSlice (or Endpoints) informer: namespace and selectors.
  informer::InformerOptions endpoints;
  /// Key of the Pod informer (for the targetRef join of Pod labels).
  informer::InformerOptions pods;
  /// Names the feed's two handlers in metrics and logs ("<name>-slices", "<name>-pods").
  /// Empty: "endpoint-feed-<cluster>".
  std::string name;
  /// The client's epoch (RemoteCluster::epoch; 0 for a cluster that has one client for ever).
  /// A feed fences its cluster in the index at this epoch when it starts: input of feeds from
  /// older clients is dropped from then on (make-before-break: the old client's late deliveries
  /// never land). Feeds of one client share the epoch and do not fence each other.
  std::uint64_t epoch = 0;
};

/// Registers handlers on one cluster's endpoint and Pod informers (from that cluster's
/// InformerFactory, shared with every other component) and turns their notifications into the
/// index's inputs: add/update -> upsert_slice / upsert_endpoints / upsert_pod, delete (including
/// a relist's tombstone) -> remove_slice / remove_endpoints / remove_pod. The handlers run on the
/// factory's executor; the index computes on that thread and hands snapshots to subscribers
/// (EndpointSubscriptions) without waiting for them.
///
/// Closing the feed closes its two registrations (the informers keep running for the factory's
/// other users) and, with close(true), removes the cluster from the index.
///
/// Lifetime: the factory must outlive the constructor call only (registrations may outlive it);
/// the feed holds the index by shared_ptr.
/// Thread-safety: has_synced() may be called from any thread; close() and the destructor must not
/// race with each other.
class EndpointFeed {
 public:
  /// Throws client::ConfigError as InformerFactory::informer() does, std::invalid_argument for a
  /// null index or an empty cluster name, or when the cluster already has the other source.
  EndpointFeed(EndpointIndexPtr index, std::string cluster, informer::InformerFactory& factory,
               const EndpointFeedOptions& options = {});
  /// close(false).
  ~EndpointFeed();
  EndpointFeed(const EndpointFeed&) = delete;
  EndpointFeed& operator=(const EndpointFeed&) = delete;

  /// True once both handlers received their informer's initial list.
  [[nodiscard]] bool has_synced() const;
  /// Closes both registrations (waiting for a running callback); then, if
  /// `remove_cluster_from_index`, removes the cluster from the index. Idempotent.
  void close(bool remove_cluster_from_index);
  [[nodiscard]] const std::string& cluster() const noexcept { return cluster_; }
  /// Make-before-break (a cluster's client replaced, ClusterRegistry's `updated`): the new feed
  /// (options.epoch: the new client's) fences the cluster in the index at construction, so
  /// nothing the old feed still delivers lands; close the old feed with close(false); then —
  /// once the new factory's informers have synced (`synced`), never before: an unsynced store
  /// would look empty — call prune_stale() on the new one. It makes the index's inputs of this
  /// cluster equal to this feed's stores: first it writes what they hold and the index lacks
  /// (or holds at another resourceVersion), then it removes what they do not hold (what only
  /// the old client saw, e.g. deleted while its token was already revoked), so the shard never
  /// passes through an emptier state. A write is checked against the store afterwards and
  /// repeated if the store changed meanwhile. Returns how many inputs it changed.
  std::size_t prune_stale();

 private:
  EndpointIndexPtr index_;
  std::string cluster_;
  std::uint64_t epoch_ = 0;  // the client's epoch: this feed's input, and its fence
  EndpointSource source_ = EndpointSource::slices;
  std::shared_ptr<const cache::Store> endpoints_store_;
  std::shared_ptr<const cache::Store> pods_store_;
  informer::Registration endpoints_;
  informer::Registration pods_;
};

}  // namespace kinformer::mesh
