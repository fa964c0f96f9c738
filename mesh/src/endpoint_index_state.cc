#include "endpoint_index_state.h"

#include <algorithm>

#include "endpoint_shard.h"

namespace kinformer::mesh {
namespace {

// "ns" of a service key "ns/name": the namespace of its slices (or Endpoints), which is where a
// targetRef without a namespace points.
std::string service_namespace(const std::string& service_key) {
  return service_key.substr(0, service_key.find('/'));
}

}  // namespace

bool EndpointIndex::State::accepts(std::string_view cluster, std::uint64_t epoch) {
  auto it = fences.find(cluster);
  const bool ok = it == fences.end() || epoch >= it->second;
  if (!ok) ++dropped;
  return ok;
}

bool EndpointIndex::State::has_input(const std::string& service_key) const {
  return std::any_of(clusters.begin(), clusters.end(), [&](const auto& entry) {
    const Cluster& c = entry.second;
    auto s = c.slices_by_service.find(service_key);
    return (s != c.slices_by_service.end() && !s->second.empty()) ||
           c.endpoints.contains(service_key);
  });
}

void EndpointIndex::State::track_use(const std::string& service_key) {
  if (has_input(service_key)) {
    unused.erase(service_key);
    return;
  }
  const auto now = options.clock->now();
  if (unused.try_emplace(service_key, now).second) unused_order.emplace_back(now, service_key);
}

std::size_t EndpointIndex::State::sweep(Pending& pending) {
  const auto now = options.clock->now();
  std::size_t forgotten = 0;
  while (!unused_order.empty() && now - unused_order.front().first >= options.forget_after) {
    auto [since, service_key] = std::move(unused_order.front());
    unused_order.pop_front();
    auto it = unused.find(service_key);
    if (it == unused.end() || it->second != since) continue;  // used again since
    unused.erase(it);
    for (auto& [name, c] : clusters) {
      // A shard without input names no Pod: nothing points to it from services_by_pod.
      c.shards.erase(service_key);
      c.slices_by_service.erase(service_key);
    }
    ++forgotten;
    auto by_service = subsets_by_service.find(service_key);
    if (by_service == subsets_by_service.end()) continue;
    for (const auto& key : by_service->second) {
      Subset& subset = subsets.at(key);
      auto s = std::make_shared<EndpointSnapshot>();
      s->service = subset.service;
      s->port_name = subset.port;
      s->selector = subset.selector_text;
      s->version = ++version;
      s->forgotten = true;
      subset.snapshot = s;
      for (const auto& w : subset.watchers) pending.emplace_back(w.callback, s);
    }
  }
  return forgotten;
}

bool EndpointIndex::State::recompute_shard(Cluster& c, const std::string& service_key) {
  detail::EndpointsByAddress by_address;
  if (c.source == EndpointSource::endpoints) {
    if (auto it = c.endpoints.find(service_key); it != c.endpoints.end()) {
      detail::add_endpoints(*it->second, by_address);
    }
  } else {
    std::vector<const SliceEntry*> entries;
    if (auto it = c.slices_by_service.find(service_key); it != c.slices_by_service.end()) {
      for (const auto& slice_key : it->second) entries.push_back(&c.slices.at(slice_key));
    }
    // Oldest first, so that a newer slice overwrites an address an older one also lists.
    std::sort(entries.begin(), entries.end(),
              [](const auto* a, const auto* b) { return a->seq < b->seq; });
    for (const SliceEntry* entry : entries) detail::add_slice(*entry->slice, by_address);
  }
  // Join the Pods' labels through targetRef.
  std::set<std::string> pods;
  for (auto& [address, e] : by_address) {
    std::string key = detail::pod_key(e.target_ref, service_namespace(service_key));
    if (key.empty()) continue;
    pods.insert(key);
    if (auto it = c.pods.find(key); it != c.pods.end()) {
      e.pod_known = true;
      e.pod_labels = it->second->metadata.labels;
    }
  }
  std::vector<Endpoint> endpoints;
  endpoints.reserve(by_address.size());
  for (auto& [address, e] : by_address) endpoints.push_back(std::move(e));

  auto [it, inserted] = c.shards.try_emplace(service_key);
  Shard& shard = it->second;
  for (const auto& p : shard.pods) {
    if (pods.count(p) != 0) continue;
    auto r = c.services_by_pod.find(p);
    if (r == c.services_by_pod.end()) continue;
    r->second.erase(service_key);
    if (r->second.empty()) c.services_by_pod.erase(r);
  }
  for (const auto& p : pods) c.services_by_pod[p].insert(service_key);
  shard.pods = std::move(pods);
  if (!inserted && shard.endpoints == endpoints) return false;
  shard.endpoints = std::move(endpoints);
  shard.version = ++version;
  return true;
}

std::shared_ptr<ClusterFreshness> EndpointIndex::State::freshness_of(std::string_view cluster) {
  auto it = freshness.find(cluster);
  if (it == freshness.end()) {
    it = freshness.emplace(std::string(cluster), std::make_shared<ClusterFreshness>()).first;
  }
  return it->second;
}

std::shared_ptr<const ClusterEndpoints> EndpointIndex::State::part(const std::string& cluster,
                                                                   const Shard& shard,
                                                                   const Subset& subset) {
  auto out = std::make_shared<ClusterEndpoints>();
  out->cluster = cluster;
  out->freshness = freshness_of(cluster);
  out->version = shard.version;
  for (const auto& e : shard.endpoints) {
    if (e.port(subset.port) == nullptr) continue;
    if (!subset.selector.matches(e.pod_labels)) continue;
    out->endpoints.push_back(e);
  }
  return out;
}

void EndpointIndex::State::fill_merged(EndpointSnapshot& s) {
  s.merged.clear();
  for (const auto& [name, part] : s.clusters) {
    for (const auto& e : part->endpoints) s.merged.push_back({part.get(), &e});
  }
}

EndpointSnapshotPtr EndpointIndex::State::build(const Subset& subset,
                                                std::uint64_t snapshot_version) {
  auto s = std::make_shared<EndpointSnapshot>();
  s->service = subset.service;
  s->port_name = subset.port;
  s->selector = subset.selector_text;
  s->version = snapshot_version;
  const std::string service_key = subset.service.key();
  for (const auto& [name, c] : clusters) {
    auto it = c.shards.find(service_key);
    if (it == c.shards.end()) continue;
    s->clusters.emplace(name, part(name, it->second, subset));
  }
  fill_merged(*s);
  return s;
}

void EndpointIndex::State::refresh(const std::string& service_key, const std::string& cluster,
                                   const SubsetFilter& filter, Pending& pending) {
  auto by_service = subsets_by_service.find(service_key);
  if (by_service == subsets_by_service.end()) return;
  const Shard* shard = nullptr;
  if (auto c = clusters.find(cluster); c != clusters.end()) {
    if (auto s = c->second.shards.find(service_key); s != c->second.shards.end()) {
      shard = &s->second;
    }
  }
  for (const auto& key : by_service->second) {
    Subset& subset = subsets.at(key);
    if (filter && !filter(subset)) continue;
    const EndpointSnapshot& old = *subset.snapshot;
    auto old_part = old.clusters.find(cluster);
    std::shared_ptr<const ClusterEndpoints> new_part;
    if (shard != nullptr) new_part = part(cluster, *shard, subset);
    bool changed;
    if (old_part == old.clusters.end()) {
      changed = new_part != nullptr;
    } else {
      changed = new_part == nullptr || new_part->endpoints != old_part->second->endpoints;
    }
    if (!changed) continue;
    auto s = std::make_shared<EndpointSnapshot>();
    s->service = old.service;
    s->port_name = old.port_name;
    s->selector = old.selector;
    s->version = ++version;
    s->clusters = old.clusters;  // the other clusters' parts are shared, not recomputed
    if (new_part) {
      s->clusters.insert_or_assign(cluster, std::move(new_part));
    } else {
      s->clusters.erase(cluster);
    }
    fill_merged(*s);
    subset.snapshot = s;
    for (const auto& w : subset.watchers) pending.emplace_back(w.callback, s);
  }
}

void EndpointIndex::State::recompute_and_refresh(const std::string& cluster, Cluster& c,
                                                 const std::string& service_key, Pending& pending) {
  if (service_key.empty()) return;
  if (recompute_shard(c, service_key)) refresh(service_key, cluster, nullptr, pending);
  track_use(service_key);
}

void EndpointIndex::State::pod_changed(const std::string& cluster, Cluster& c,
                                       const std::string& key, const client::StringMap* old_labels,
                                       const client::StringMap& new_labels, Pending& pending) {
  auto r = c.services_by_pod.find(key);
  if (r == c.services_by_pod.end()) return;
  const std::set<std::string> services = r->second;  // recompute_shard edits services_by_pod
  SubsetFilter affected = [&](const Subset& s) {
    if (old_labels == nullptr) return true;  // the affected set cannot be known: every subset
    return s.selector.matches(*old_labels) || s.selector.matches(new_labels);
  };
  for (const auto& service_key : services) {
    if (recompute_shard(c, service_key)) refresh(service_key, cluster, affected, pending);
  }
}

void EndpointIndex::State::notify(Pending& pending) {
  for (auto& [callback, snapshot] : pending) {
    try {
      (*callback)(snapshot);
    } catch (...) {
      // A callback must not throw; the index's input path must not fail because one did.
    }
  }
}

EndpointIndex::State::Cluster* EndpointIndex::State::cluster_for(const std::string& name,
                                                                 EndpointSource source) {
  Cluster& c = clusters[name];
  if (!c.source) c.source = source;
  return *c.source == source ? &c : nullptr;
}

void EndpointIndex::State::unwatch(const std::string& key, std::uint64_t id) {
  std::lock_guard lock(mu);
  auto it = subsets.find(key);
  if (it == subsets.end()) return;
  auto& ws = it->second.watchers;
  ws.erase(std::remove_if(ws.begin(), ws.end(), [&](const Watcher& w) { return w.id == id; }),
           ws.end());
  if (!ws.empty()) return;
  auto by_service = subsets_by_service.find(it->second.service.key());
  if (by_service != subsets_by_service.end()) {
    by_service->second.erase(key);
    if (by_service->second.empty()) subsets_by_service.erase(by_service);
  }
  subsets.erase(it);
}

}  // namespace kinformer::mesh
