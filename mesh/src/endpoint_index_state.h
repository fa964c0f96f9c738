#pragma once
// EndpointIndex's state: the inputs per cluster, the shards computed from them, the watched
// subsets and their snapshots, the clusters' fences, and the services waiting to be forgotten.
// Private to mesh/src; every member is guarded by `mu`, every method expects it held (except
// notify(), which runs the callbacks after it was released, and unwatch(), which takes it).

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kinformer/mesh/endpoint_index.h"

namespace kinformer::mesh {

class EndpointIndex::State {
 public:
  struct SliceEntry {
    std::shared_ptr<const client::EndpointSlice> slice;
    std::uint64_t seq = 0;    // arrival order: the newest slice wins an address
    std::string service_key;  // "" when the slice names no service
  };
  struct Shard {
    std::uint64_t version = 0;
    std::vector<Endpoint> endpoints;  // sorted by address, unique
    std::set<std::string> pods;       // Pod keys the endpoints name
  };
  struct Cluster {
    std::optional<EndpointSource> source;
    std::map<std::string, SliceEntry, std::less<>> slices;
    std::map<std::string, std::set<std::string>, std::less<>> slices_by_service;
    std::map<std::string, std::shared_ptr<const client::Endpoints>, std::less<>> endpoints;
    std::map<std::string, std::shared_ptr<const client::Pod>, std::less<>> pods;
    std::map<std::string, std::set<std::string>, std::less<>> services_by_pod;  // from the shards
    std::map<std::string, Shard, std::less<>> shards;                           // by service key
  };
  struct Watcher {
    std::uint64_t id = 0;
    std::shared_ptr<const Callback> callback;
  };
  struct Subset {
    ServiceRef service;
    std::string port;
    cache::LabelSelector selector;
    std::string selector_text;
    EndpointSnapshotPtr snapshot;
    std::vector<Watcher> watchers;
  };
  using Pending = std::vector<std::pair<std::shared_ptr<const Callback>, EndpointSnapshotPtr>>;
  using SubsetFilter = std::function<bool(const Subset&)>;

  explicit State(EndpointIndexOptions o) : options(std::move(o)) {
    if (!options.clock) options.clock = client::system_clock();
  }

  EndpointIndexOptions options;
  mutable std::mutex mu;
  std::map<std::string, Cluster, std::less<>> clusters;             // guarded by mu
  std::map<std::string, Subset> subsets;                            // guarded by mu
  std::map<std::string, std::set<std::string>> subsets_by_service;  // guarded by mu
  std::uint64_t version = 0;                                        // guarded by mu
  std::uint64_t next_seq = 0;                                       // guarded by mu
  std::uint64_t next_watch_id = 0;                                  // guarded by mu
  std::map<std::string, std::uint64_t, std::less<>> fences;  // guarded by mu: cluster -> epoch
  std::uint64_t dropped = 0;                                 // guarded by mu
  // Per cluster name ever seen (kept after remove_cluster: a few bytes each, and a re-added
  // cluster's old snapshots then still ask its current feed).
  std::map<std::string, std::shared_ptr<ClusterFreshness>, std::less<>> freshness;  // mu
  // Services with no input in any cluster, since when; and the same in the order they became
  // so (an entry whose time no longer matches `unused` is stale and skipped).
  std::map<std::string, client::Clock::TimePoint> unused;                     // guarded by mu
  std::deque<std::pair<client::Clock::TimePoint, std::string>> unused_order;  // guarded by mu

  // mu held. The freshness cell of `cluster`, created at first use.
  std::shared_ptr<ClusterFreshness> freshness_of(std::string_view cluster);

  // mu held. True when input of `epoch` may change `cluster` (counted when not).
  bool accepts(std::string_view cluster, std::uint64_t epoch);

  // mu held. Whether any cluster holds a slice (or Endpoints) of the service.
  bool has_input(const std::string& service_key) const;

  // mu held. Notes whether the service is in use now; an unused one is forgotten forget_after
  // from now unless it gets input again.
  void track_use(const std::string& service_key);

  // mu held. Forgets the services unused for forget_after: their shards go in every cluster,
  // and their watched subsets get a snapshot without clusters, marked forgotten.
  std::size_t sweep(Pending& pending);

  // mu held. Recomputes the shard of `service_key` in `c` from the inputs `c` now holds (full
  // replacement: the previous shard is only compared with, never merged into). Returns true when
  // the shard is new or its endpoints differ.
  bool recompute_shard(Cluster& c, const std::string& service_key);

  // mu held. The part of `shard` that `subset` selects.
  std::shared_ptr<const ClusterEndpoints> part(const std::string& cluster, const Shard& shard,
                                               const Subset& subset);

  static void fill_merged(EndpointSnapshot& s);

  // mu held. The snapshot of `subset` computed from every cluster's shard.
  EndpointSnapshotPtr build(const Subset& subset, std::uint64_t snapshot_version);

  // mu held. Recomputes the part of `cluster` (absent: removed) in every watched subset of
  // `service_key` that `filter` selects (null: all); queues a notification for each that changed.
  void refresh(const std::string& service_key, const std::string& cluster,
               const SubsetFilter& filter, Pending& pending);

  // mu held: recomputes the shard and, when it changed, every watched subset of the service.
  void recompute_and_refresh(const std::string& cluster, Cluster& c, const std::string& service_key,
                             Pending& pending);

  // mu held. A Pod's labels went from `old_labels` (nullptr: not known to the index) to
  // `new_labels`: recomputes the shards that name it and the subsets the change can affect.
  void pod_changed(const std::string& cluster, Cluster& c, const std::string& key,
                   const client::StringMap* old_labels, const client::StringMap& new_labels,
                   Pending& pending);

  // Takes `pending` out of the lock's scope and runs it.
  static void notify(Pending& pending);

  // mu held.
  Cluster* cluster_for(const std::string& name, EndpointSource source);

  void unwatch(const std::string& key, std::uint64_t id);
};

}  // namespace kinformer::mesh
