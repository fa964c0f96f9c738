#include "kinformer/mesh/endpoint_index.h"

#include "endpoint_index_state.h"

#include <algorithm>
#include <deque>
#include <mutex>
#include <set>
#include <utility>

namespace kinformer::mesh {

const EndpointPort* Endpoint::port(std::string_view name) const noexcept {
  for (const auto& p : ports) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

const ClusterEndpoints* EndpointSnapshot::cluster(std::string_view name) const {
  auto it = clusters.find(name);
  return it == clusters.end() ? nullptr : it->second.get();
}

namespace {

// The subset key: service key, port name and canonical selector, separated by NULs (none of the
// three contains one).
std::string subset_key(const std::string& service_key, const std::string& port,
                       const std::string& selector) {
  std::string k = service_key;
  k += '\0';
  k += port;
  k += '\0';
  k += selector;
  return k;
}

}  // namespace

// ---- Watch ----

// One watch on one subset, as a Handle closes it.
class EndpointIndex::SubsetWatch final : public informer::Closable {
 public:
  SubsetWatch(std::weak_ptr<State> state, std::string subset, std::uint64_t id)
      : state_(std::move(state)), subset_(std::move(subset)), id_(id) {}
  bool close() override {
    if (auto state = state_.lock()) state->unwatch(subset_, id_);
    closed_ = true;
    return true;
  }
  [[nodiscard]] bool active() const override { return !closed_; }

 private:
  const std::weak_ptr<State> state_;
  const std::string subset_;
  const std::uint64_t id_;
  std::atomic<bool> closed_{false};
};

// ---- EndpointIndex ----

EndpointIndex::EndpointIndex(EndpointIndexOptions options)
    : state_(std::make_shared<State>(std::move(options))) {}
EndpointIndex::~EndpointIndex() = default;

bool EndpointIndex::set_source(const std::string& cluster, EndpointSource source) {
  std::lock_guard lock(state_->mu);
  return state_->cluster_for(cluster, source) != nullptr;
}

informer::Freshness ClusterFreshness::get() const {
  std::shared_ptr<const Source> source;
  {
    std::lock_guard lock(mu_);
    source = source_;
  }
  return source && *source ? (*source)() : informer::Freshness{};
}

void ClusterFreshness::set(Source source) {
  auto next = std::make_shared<const Source>(std::move(source));
  std::lock_guard lock(mu_);
  source_ = std::move(next);
}

bool EndpointIndex::set_freshness(const std::string& cluster, std::uint64_t epoch,
                                  ClusterFreshness::Source source) {
  // Under the index's lock (the cell's is a leaf): a feed of an older client constructed at the
  // same time as the newer one's cannot set its source after it. Not input: not counted as
  // dropped.
  std::lock_guard lock(state_->mu);
  auto fence = state_->fences.find(cluster);
  if (fence != state_->fences.end() && epoch < fence->second) return false;  // an older client
  state_->freshness_of(cluster)->set(std::move(source));
  return true;
}

void EndpointIndex::fence(const std::string& cluster, std::uint64_t epoch) {
  std::lock_guard lock(state_->mu);
  std::uint64_t& fence = state_->fences[cluster];
  fence = std::max(fence, epoch);
}

// Every input call: under the lock, the fence, then `apply` (which queues notifications), then
// the services unused for forget_after are forgotten; the callbacks run after the lock.
template <typename Apply>
bool EndpointIndex::input(std::string_view cluster, std::uint64_t epoch, Apply&& apply) {
  State::Pending pending;
  bool taken = false;
  {
    std::lock_guard lock(state_->mu);
    if (!state_->accepts(cluster, epoch)) return false;
    taken = apply(pending);
    state_->sweep(pending);
  }
  State::notify(pending);
  return taken;
}

bool EndpointIndex::upsert_slice(const std::string& cluster,
                                 std::shared_ptr<const client::EndpointSlice> slice,
                                 std::uint64_t epoch) {
  return input(cluster, epoch, [&](State::Pending& pending) {
    State::Cluster* c = state_->cluster_for(cluster, EndpointSource::slices);
    if (c == nullptr) return false;
    std::string key = slice->key();
    std::string name = slice->service_name();
    std::string service_key =
        name.empty() ? std::string() : client::make_key(slice->metadata.namespace_, name);
    State::SliceEntry& entry = c->slices[key];
    std::string old_service_key = std::move(entry.service_key);
    if (old_service_key != service_key && !old_service_key.empty()) {
      // The set stays when it empties: the old service's shard is recomputed (to empty) below.
      c->slices_by_service[old_service_key].erase(key);
    }
    entry.slice = std::move(slice);
    entry.seq = ++state_->next_seq;
    entry.service_key = service_key;
    if (!service_key.empty()) c->slices_by_service[service_key].insert(key);
    state_->recompute_and_refresh(cluster, *c, service_key, pending);
    if (old_service_key != service_key) {
      state_->recompute_and_refresh(cluster, *c, old_service_key, pending);
    }
    return true;
  });
}

bool EndpointIndex::remove_slice(const std::string& cluster, std::string_view key,
                                 std::uint64_t epoch) {
  return input(cluster, epoch, [&](State::Pending& pending) {
    auto c = state_->clusters.find(cluster);
    if (c == state_->clusters.end()) return true;
    auto it = c->second.slices.find(key);
    if (it == c->second.slices.end()) return true;
    std::string service_key = std::move(it->second.service_key);
    if (!service_key.empty()) c->second.slices_by_service[service_key].erase(it->first);
    c->second.slices.erase(it);
    state_->recompute_and_refresh(cluster, c->second, service_key, pending);
    return true;
  });
}

bool EndpointIndex::upsert_endpoints(const std::string& cluster,
                                     std::shared_ptr<const client::Endpoints> endpoints,
                                     std::uint64_t epoch) {
  return input(cluster, epoch, [&](State::Pending& pending) {
    State::Cluster* c = state_->cluster_for(cluster, EndpointSource::endpoints);
    if (c == nullptr) return false;
    std::string key = endpoints->key();
    c->endpoints.insert_or_assign(key, std::move(endpoints));
    state_->recompute_and_refresh(cluster, *c, key, pending);
    return true;
  });
}

bool EndpointIndex::remove_endpoints(const std::string& cluster, std::string_view key,
                                     std::uint64_t epoch) {
  return input(cluster, epoch, [&](State::Pending& pending) {
    auto c = state_->clusters.find(cluster);
    if (c == state_->clusters.end()) return true;
    auto it = c->second.endpoints.find(key);
    if (it == c->second.endpoints.end()) return true;
    std::string service_key = it->first;
    c->second.endpoints.erase(it);
    state_->recompute_and_refresh(cluster, c->second, service_key, pending);
    return true;
  });
}

bool EndpointIndex::upsert_pod(const std::string& cluster, std::shared_ptr<const client::Pod> pod,
                               std::uint64_t epoch) {
  return input(cluster, epoch, [&](State::Pending& pending) {
    State::Cluster& c = state_->clusters[cluster];
    std::string key = pod->key();
    auto it = c.pods.find(key);
    std::shared_ptr<const client::Pod> old;
    if (it != c.pods.end()) old = it->second;
    const client::StringMap& labels = pod->metadata.labels;
    c.pods.insert_or_assign(key, pod);
    if (!old || old->metadata.labels != labels) {
      state_->pod_changed(cluster, c, key, old ? &old->metadata.labels : nullptr, labels, pending);
    }
    return true;
  });
}

bool EndpointIndex::remove_pod(const std::string& cluster, std::string_view key,
                               std::uint64_t epoch) {
  return input(cluster, epoch, [&](State::Pending& pending) {
    auto c = state_->clusters.find(cluster);
    if (c == state_->clusters.end()) return true;
    auto it = c->second.pods.find(key);
    if (it == c->second.pods.end()) return true;
    std::shared_ptr<const client::Pod> old = it->second;
    std::string pod_key = it->first;
    c->second.pods.erase(it);
    static const client::StringMap kNoLabels;
    state_->pod_changed(cluster, c->second, pod_key, &old->metadata.labels, kNoLabels, pending);
    return true;
  });
}

bool EndpointIndex::remove_cluster(const std::string& cluster, std::uint64_t epoch) {
  return input(cluster, epoch, [&](State::Pending& pending) {
    auto c = state_->clusters.find(cluster);
    if (c == state_->clusters.end()) return true;
    std::vector<std::string> services;
    for (const auto& [service_key, shard] : c->second.shards) services.push_back(service_key);
    state_->clusters.erase(c);
    ++state_->version;
    for (const auto& service_key : services) {
      state_->refresh(service_key, cluster, nullptr, pending);
      state_->track_use(service_key);
    }
    return true;
  });
}

std::size_t EndpointIndex::sweep() {
  State::Pending pending;
  std::size_t forgotten = 0;
  {
    std::lock_guard lock(state_->mu);
    forgotten = state_->sweep(pending);
  }
  State::notify(pending);
  return forgotten;
}

EndpointIndex::Watch EndpointIndex::watch(const EndpointQuery& query, Callback callback,
                                          EndpointSnapshotPtr* current) {
  cache::LabelSelector selector = query.selector.value_or(cache::LabelSelector());
  std::string selector_text = selector.to_string();
  const std::string service_key = query.service.key();
  std::string key = subset_key(service_key, query.port_name, selector_text);
  std::lock_guard lock(state_->mu);
  auto [it, inserted] = state_->subsets.try_emplace(key);
  State::Subset& subset = it->second;
  if (inserted) {
    subset.service = query.service;
    subset.port = query.port_name;
    subset.selector = std::move(selector);
    subset.selector_text = std::move(selector_text);
    subset.snapshot = state_->build(subset, ++state_->version);
    state_->subsets_by_service[service_key].insert(key);
  }
  std::uint64_t id = ++state_->next_watch_id;
  subset.watchers.push_back({id, std::make_shared<const Callback>(std::move(callback))});
  if (current != nullptr) *current = subset.snapshot;
  return Watch(std::make_shared<SubsetWatch>(state_, std::move(key), id));
}

EndpointSnapshotPtr EndpointIndex::snapshot(const EndpointQuery& query) const {
  cache::LabelSelector selector = query.selector.value_or(cache::LabelSelector());
  std::string selector_text = selector.to_string();
  std::string key = subset_key(query.service.key(), query.port_name, selector_text);
  std::lock_guard lock(state_->mu);
  if (auto it = state_->subsets.find(key); it != state_->subsets.end()) return it->second.snapshot;
  State::Subset subset;
  subset.service = query.service;
  subset.port = query.port_name;
  subset.selector = std::move(selector);
  subset.selector_text = std::move(selector_text);
  return state_->build(subset, state_->version);
}

std::size_t EndpointIndex::subset_count() const {
  std::lock_guard lock(state_->mu);
  return state_->subsets.size();
}

std::vector<std::string> EndpointIndex::clusters() const {
  std::lock_guard lock(state_->mu);
  std::vector<std::string> out;
  for (const auto& [name, c] : state_->clusters) out.push_back(name);
  return out;
}

EndpointIndex::ClusterKeys EndpointIndex::keys(const std::string& cluster) const {
  std::lock_guard lock(state_->mu);
  ClusterKeys out;
  auto c = state_->clusters.find(cluster);
  if (c == state_->clusters.end()) return out;
  for (const auto& [key, s] : c->second.slices) {
    out.slices[key] = s.slice->metadata.resource_version;
  }
  for (const auto& [key, e] : c->second.endpoints) {
    out.endpoints[key] = e->metadata.resource_version;
  }
  for (const auto& [key, pod] : c->second.pods) out.pods[key] = pod->metadata.resource_version;
  return out;
}

std::size_t EndpointIndex::service_count() const {
  std::lock_guard lock(state_->mu);
  std::set<std::string_view> services;
  for (const auto& [name, c] : state_->clusters) {
    for (const auto& [service_key, shard] : c.shards) services.insert(service_key);
  }
  return services.size();
}

std::uint64_t EndpointIndex::dropped_writes() const {
  std::lock_guard lock(state_->mu);
  return state_->dropped;
}

std::uint64_t EndpointIndex::version() const {
  std::lock_guard lock(state_->mu);
  return state_->version;
}

}  // namespace kinformer::mesh
