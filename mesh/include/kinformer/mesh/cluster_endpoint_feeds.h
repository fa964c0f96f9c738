#pragma once
// ClusterEndpointFeeds: one EndpointFeed per cluster of a ClusterRegistry.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kinformer/mesh/cluster_registry.h"
#include "kinformer/mesh/endpoint_feed.h"
#include "kinformer/mesh/endpoint_index.h"

namespace kinformer::mesh {

/// Keeps an EndpointIndex fed from the local cluster and every remote cluster of a registry:
/// - added: an EndpointFeed on the cluster's factory (its shared informers);
/// - updated (make-before-break): a feed on the new factory first (it fences the cluster in the
///   index at the new client's epoch: nothing the old client still delivers lands), then the old
///   feed closed without removing anything, then prune_stale() once the new client has synced
///   (at once, or at its `synced` after a sync timeout) — the cluster's shard is never absent
///   or emptied by the switch, and ends equal to what the new client's caches hold;
/// - removed: the feed closed and the cluster removed from the index (its subscribers get a
///   snapshot without it).
/// Every feed uses the same options (`options.name` empty: "endpoint-feed-<cluster>").
///
/// Lifetime: the registry must outlive the constructor call; closing (or destroying) this
/// unsubscribes and closes every feed (the clusters stay in the index).
/// Thread-safety: thread-safe.
class ClusterEndpointFeeds {
 public:
  /// `include_local`: also feed the registry's local cluster (ID local_cluster_id()).
  ClusterEndpointFeeds(EndpointIndexPtr index, ClusterRegistry& registry,
                       EndpointFeedOptions options, bool include_local = true);
  ~ClusterEndpointFeeds() { close(); }
  ClusterEndpointFeeds(const ClusterEndpointFeeds&) = delete;
  ClusterEndpointFeeds& operator=(const ClusterEndpointFeeds&) = delete;

  /// Every current feed has synced (its handlers saw their informers' initial lists).
  [[nodiscard]] bool has_synced() const;
  /// The clusters fed now.
  [[nodiscard]] std::vector<std::string> clusters() const;
  void close();

 private:
  struct State {
    EndpointIndexPtr index;
    EndpointFeedOptions options;
    mutable std::mutex mu;
    std::map<std::string, std::unique_ptr<EndpointFeed>> feeds;  // guarded by mu
    std::map<std::string, std::uint64_t>
        prune_at;         // guarded by mu: cluster -> generation to prune at `synced`
    bool closed = false;  // guarded by mu
  };
  std::shared_ptr<State> state_;
  ClusterSubscription subscription_;
};

}  // namespace kinformer::mesh
