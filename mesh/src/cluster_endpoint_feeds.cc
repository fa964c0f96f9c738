#include "kinformer/mesh/cluster_endpoint_feeds.h"

#include <utility>

namespace kinformer::mesh {
namespace {

// A remote cluster's feed carries its client's epoch (the index fences older clients by it).
EndpointFeedOptions options_for(const EndpointFeedOptions& common, const RemoteCluster& cluster) {
  EndpointFeedOptions o = common;
  o.epoch = cluster.epoch;
  return o;
}

}  // namespace

ClusterEndpointFeeds::ClusterEndpointFeeds(EndpointIndexPtr index, ClusterRegistry& registry,
                                           EndpointFeedOptions options, bool include_local)
    : state_(std::make_shared<State>()) {
  state_->index = std::move(index);
  state_->options = std::move(options);
  if (include_local) {
    auto feed = std::make_unique<EndpointFeed>(state_->index, registry.local_cluster_id(),
                                               *registry.factory(registry.local_cluster_id()),
                                               state_->options);
    state_->feeds.emplace(registry.local_cluster_id(), std::move(feed));
  }
  // The handlers hold the state, not this object: a call running while it closes is harmless.
  auto s = state_;
  subscription_ = registry.subscribe(ClusterHandler{
      .added =
          [s](const RemoteClusterPtr& c) {
            auto feed = std::make_unique<EndpointFeed>(s->index, c->id, *c->factory,
                                                       options_for(s->options, *c));
            std::unique_ptr<EndpointFeed> replaced;  // none expected; closed outside the lock
            std::lock_guard lock(s->mu);
            if (!s->closed) replaced = std::exchange(s->feeds[c->id], std::move(feed));
          },
      .updated =
          [s](const RemoteClusterPtr& now, const RemoteClusterPtr&) {
            // The new feed fences the cluster in the index at the new client's epoch: from
            // here on nothing the old client still delivers lands in a shard.
            auto fresh = std::make_unique<EndpointFeed>(s->index, now->id, *now->factory,
                                                        options_for(s->options, *now));
            EndpointFeed* added = fresh.get();
            std::unique_ptr<EndpointFeed> old;
            {
              std::lock_guard lock(s->mu);
              if (s->closed) return;
              old = std::exchange(s->feeds[now->id], std::move(fresh));
              if (!now->factory->has_synced()) s->prune_at[now->id] = now->generation;
            }
            // Outside the lock: closing waits for the old handlers' running callbacks, and
            // those (through the index's watch callbacks) may call into this object.
            if (old) old->close(false);
            // Converge on what the new client holds once its stores are complete: now when it
            // synced before the switch, else at its `synced` (after a sync timeout the old
            // entries stay meanwhile, never an empty shard). Only the registry's worker thread
            // runs these handlers, so `added` is still the cluster's feed.
            if (now->factory->has_synced()) added->prune_stale();
          },
      .synced =
          [s](const RemoteClusterPtr& c) {
            EndpointFeed* feed = nullptr;
            {
              std::lock_guard lock(s->mu);
              auto at = s->prune_at.find(c->id);
              if (at == s->prune_at.end() || at->second != c->generation) return;
              s->prune_at.erase(at);
              if (auto it = s->feeds.find(c->id); it != s->feeds.end()) feed = it->second.get();
            }
            // The feed lives until `removed` or close(), neither of which runs meanwhile (the
            // registry's handlers run one at a time; close() unsubscribes first).
            if (feed) feed->prune_stale();
          },
      .removed =
          [s](const RemoteClusterPtr& c) {
            std::unique_ptr<EndpointFeed> feed;
            {
              std::lock_guard lock(s->mu);
              if (auto it = s->feeds.find(c->id); it != s->feeds.end()) {
                feed = std::move(it->second);
                s->feeds.erase(it);
              }
              s->prune_at.erase(c->id);
            }
            if (feed) feed->close(true);
          },
  });
}

bool ClusterEndpointFeeds::has_synced() const {
  std::lock_guard lock(state_->mu);
  for (const auto& [id, feed] : state_->feeds) {
    if (!feed->has_synced()) return false;
  }
  return true;
}

std::vector<std::string> ClusterEndpointFeeds::clusters() const {
  std::lock_guard lock(state_->mu);
  std::vector<std::string> out;
  for (const auto& [id, feed] : state_->feeds) out.push_back(id);
  return out;
}

void ClusterEndpointFeeds::close() {
  subscription_.close();
  std::map<std::string, std::unique_ptr<EndpointFeed>> feeds;
  {
    std::lock_guard lock(state_->mu);
    state_->closed = true;
    feeds.swap(state_->feeds);
  }
  for (auto& [id, feed] : feeds) feed->close(false);
}

}  // namespace kinformer::mesh
