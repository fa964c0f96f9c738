#include "kinformer/cache/endpoint_index.h"

#include <algorithm>
#include <mutex>
#include <set>
#include <utility>

namespace kinformer::cache {

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

// The Pod key an endpoint's targetRef names, or "" when it names no Pod.
std::string pod_key(const std::optional<client::ObjectReference>& ref,
                    const std::string& object_namespace) {
  if (!ref || ref->kind != "Pod" || ref->name.empty()) return {};
  return client::make_key(ref->namespace_.empty() ? object_namespace : ref->namespace_.str(),
                          ref->name);
}

std::vector<EndpointPort> slice_ports(const std::vector<client::SlicePort>& in) {
  std::vector<EndpointPort> out;
  for (const auto& p : in) {
    if (!p.port) continue;  // "all ports": nothing a proxy can route to by name
    out.push_back({p.name, *p.port, p.protocol, p.app_protocol});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  out.erase(std::unique(out.begin(), out.end(),
                        [](const auto& a, const auto& b) { return a.name == b.name; }),
            out.end());
  return out;
}

std::vector<EndpointPort> subset_ports(const std::vector<client::EndpointPort>& in) {
  std::vector<EndpointPort> out;
  out.reserve(in.size());
  for (const auto& p : in) out.push_back({p.name, p.port, p.protocol, p.app_protocol});
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  out.erase(std::unique(out.begin(), out.end(),
                        [](const auto& a, const auto& b) { return a.name == b.name; }),
            out.end());
  return out;
}

}  // namespace

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
    LabelSelector selector;
    std::string selector_text;
    EndpointSnapshotPtr snapshot;
    std::vector<Watcher> watchers;
  };
  using Pending = std::vector<std::pair<std::shared_ptr<const Callback>, EndpointSnapshotPtr>>;
  using SubsetFilter = std::function<bool(const Subset&)>;

  mutable std::mutex mu;
  std::map<std::string, Cluster, std::less<>> clusters;             // guarded by mu
  std::map<std::string, Subset> subsets;                            // guarded by mu
  std::map<std::string, std::set<std::string>> subsets_by_service;  // guarded by mu
  std::uint64_t version = 0;                                        // guarded by mu
  std::uint64_t next_seq = 0;                                       // guarded by mu
  std::uint64_t next_watch_id = 0;                                  // guarded by mu

  // mu held. Recomputes the shard of `service_key` in `c` from the inputs `c` now holds (full
  // replacement: the previous shard is only compared with, never merged into). Returns true when
  // the shard is new or its endpoints differ.
  bool recompute_shard(Cluster& c, const std::string& service_key) {
    std::map<std::string, Endpoint> by_address;
    std::set<std::string> pods;
    auto join = [&](Endpoint& e, const std::string& object_namespace) {
      std::string key = pod_key(e.target_ref, object_namespace);
      if (key.empty()) return;
      pods.insert(key);
      auto it = c.pods.find(key);
      if (it == c.pods.end()) return;
      e.pod_known = true;
      e.pod_labels = it->second->metadata.labels;
    };
    if (c.source == EndpointSource::endpoints) {
      auto it = c.endpoints.find(service_key);
      if (it != c.endpoints.end()) {
        const client::Endpoints& eps = *it->second;
        for (const auto& subset : eps.subsets) {
          auto ports = subset_ports(subset.ports);
          auto add = [&](const client::EndpointAddress& a, bool ready) {
            if (a.ip.empty()) return;
            Endpoint e;
            e.address = a.ip;
            e.ports = ports;
            e.ready = ready;
            e.serving = ready;
            e.terminating = false;
            e.hostname = a.hostname;
            e.node_name = a.node_name;
            e.target_ref = a.target_ref;
            join(e, eps.metadata.namespace_);
            by_address.insert_or_assign(e.address, std::move(e));
          };
          for (const auto& a : subset.addresses) add(a, true);
          for (const auto& a : subset.not_ready_addresses) add(a, false);
        }
      }
    } else {
      std::vector<const SliceEntry*> entries;
      if (auto it = c.slices_by_service.find(service_key); it != c.slices_by_service.end()) {
        for (const auto& slice_key : it->second) entries.push_back(&c.slices.at(slice_key));
      }
      // Oldest first, so that a newer slice overwrites an address an older one also lists.
      std::sort(entries.begin(), entries.end(),
                [](const auto* a, const auto* b) { return a->seq < b->seq; });
      for (const SliceEntry* entry : entries) {
        const client::EndpointSlice& slice = *entry->slice;
        auto ports = slice_ports(slice.ports);
        for (const auto& se : slice.endpoints) {
          if (se.addresses.empty()) continue;
          Endpoint e;
          e.address = se.addresses.front();  // the API: addresses are fungible, use the first
          e.ports = ports;
          e.ready = se.ready.value_or(true);
          e.serving = se.serving.value_or(e.ready);
          e.terminating = se.terminating.value_or(false);
          e.hostname = se.hostname;
          e.node_name = se.node_name;
          e.zone = se.zone;
          e.target_ref = se.target_ref;
          join(e, slice.metadata.namespace_);
          by_address.insert_or_assign(e.address, std::move(e));
        }
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

  // The part of `shard` that `subset` selects.
  static std::shared_ptr<const ClusterEndpoints> part(const std::string& cluster,
                                                      const Shard& shard, const Subset& subset) {
    auto out = std::make_shared<ClusterEndpoints>();
    out->cluster = cluster;
    out->version = shard.version;
    for (const auto& e : shard.endpoints) {
      if (e.port(subset.port) == nullptr) continue;
      if (!subset.selector.matches(e.pod_labels)) continue;
      out->endpoints.push_back(e);
    }
    return out;
  }

  static void fill_merged(EndpointSnapshot& s) {
    s.merged.clear();
    for (const auto& [name, part] : s.clusters) {
      for (const auto& e : part->endpoints) s.merged.push_back({part.get(), &e});
    }
  }

  // mu held. The snapshot of `subset` computed from every cluster's shard.
  EndpointSnapshotPtr build(const Subset& subset, std::uint64_t snapshot_version) const {
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

  // mu held. Recomputes the part of `cluster` (absent: removed) in every watched subset of
  // `service_key` that `filter` selects (null: all); queues a notification for each that changed.
  void refresh(const std::string& service_key, const std::string& cluster,
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

  // mu held: recomputes the shard and, when it changed, every watched subset of the service.
  void recompute_and_refresh(const std::string& cluster, Cluster& c, const std::string& service_key,
                             Pending& pending) {
    if (service_key.empty()) return;
    if (recompute_shard(c, service_key)) refresh(service_key, cluster, nullptr, pending);
  }

  // mu held. A Pod's labels went from `old_labels` (nullptr: not known to the index) to
  // `new_labels`: recomputes the shards that name it and the subsets the change can affect.
  void pod_changed(const std::string& cluster, Cluster& c, const std::string& key,
                   const client::StringMap* old_labels, const client::StringMap& new_labels,
                   Pending& pending) {
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

  // Takes `pending` out of the lock's scope and runs it.
  static void notify(Pending& pending) {
    for (auto& [callback, snapshot] : pending) {
      try {
        (*callback)(snapshot);
      } catch (...) {
        // A callback must not throw; the index's input path must not fail because one did.
      }
    }
  }

  // mu held.
  Cluster* cluster_for(const std::string& name, EndpointSource source) {
    Cluster& c = clusters[name];
    if (!c.source) c.source = source;
    return *c.source == source ? &c : nullptr;
  }

  void unwatch(const std::string& key, std::uint64_t id) {
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
};

// ---- Watch ----

EndpointIndex::Watch::Watch(std::weak_ptr<State> state, std::string subset, std::uint64_t id)
    : state_(std::move(state)), subset_(std::move(subset)), id_(id) {}

EndpointIndex::Watch::Watch(Watch&& other) noexcept
    : state_(std::move(other.state_)),
      subset_(std::move(other.subset_)),
      id_(std::exchange(other.id_, 0)) {}

EndpointIndex::Watch& EndpointIndex::Watch::operator=(Watch&& other) noexcept {
  if (this != &other) {
    close();
    state_ = std::move(other.state_);
    subset_ = std::move(other.subset_);
    id_ = std::exchange(other.id_, 0);
  }
  return *this;
}

EndpointIndex::Watch::~Watch() { close(); }

void EndpointIndex::Watch::close() {
  if (id_ == 0) return;
  if (auto state = state_.lock()) state->unwatch(subset_, id_);
  id_ = 0;
  state_.reset();
}

// ---- EndpointIndex ----

EndpointIndex::EndpointIndex() : state_(std::make_shared<State>()) {}
EndpointIndex::~EndpointIndex() = default;

bool EndpointIndex::set_source(const std::string& cluster, EndpointSource source) {
  std::lock_guard lock(state_->mu);
  return state_->cluster_for(cluster, source) != nullptr;
}

bool EndpointIndex::upsert_slice(const std::string& cluster,
                                 std::shared_ptr<const client::EndpointSlice> slice) {
  State::Pending pending;
  {
    std::lock_guard lock(state_->mu);
    State::Cluster* c = state_->cluster_for(cluster, EndpointSource::slices);
    if (c == nullptr) return false;
    std::string key = slice->key();
    std::string name = slice->service_name();
    std::string service_key =
        name.empty() ? std::string() : client::make_key(slice->metadata.namespace_, name);
    State::SliceEntry& entry = c->slices[key];
    std::string old_service_key = std::move(entry.service_key);
    if (old_service_key != service_key && !old_service_key.empty()) {
      auto& keys = c->slices_by_service[old_service_key];
      keys.erase(key);
      // The set stays when it empties: the old service's shard is recomputed (to empty) below.
    }
    entry.slice = std::move(slice);
    entry.seq = ++state_->next_seq;
    entry.service_key = service_key;
    if (!service_key.empty()) c->slices_by_service[service_key].insert(key);
    state_->recompute_and_refresh(cluster, *c, service_key, pending);
    if (old_service_key != service_key) {
      state_->recompute_and_refresh(cluster, *c, old_service_key, pending);
    }
  }
  State::notify(pending);
  return true;
}

void EndpointIndex::remove_slice(const std::string& cluster, std::string_view key) {
  State::Pending pending;
  {
    std::lock_guard lock(state_->mu);
    auto c = state_->clusters.find(cluster);
    if (c == state_->clusters.end()) return;
    auto it = c->second.slices.find(key);
    if (it == c->second.slices.end()) return;
    std::string service_key = std::move(it->second.service_key);
    if (!service_key.empty()) c->second.slices_by_service[service_key].erase(it->first);
    c->second.slices.erase(it);
    state_->recompute_and_refresh(cluster, c->second, service_key, pending);
  }
  State::notify(pending);
}

bool EndpointIndex::upsert_endpoints(const std::string& cluster,
                                     std::shared_ptr<const client::Endpoints> endpoints) {
  State::Pending pending;
  {
    std::lock_guard lock(state_->mu);
    State::Cluster* c = state_->cluster_for(cluster, EndpointSource::endpoints);
    if (c == nullptr) return false;
    std::string key = endpoints->key();
    c->endpoints.insert_or_assign(key, std::move(endpoints));
    state_->recompute_and_refresh(cluster, *c, key, pending);
  }
  State::notify(pending);
  return true;
}

void EndpointIndex::remove_endpoints(const std::string& cluster, std::string_view key) {
  State::Pending pending;
  {
    std::lock_guard lock(state_->mu);
    auto c = state_->clusters.find(cluster);
    if (c == state_->clusters.end()) return;
    auto it = c->second.endpoints.find(key);
    if (it == c->second.endpoints.end()) return;
    std::string service_key = it->first;
    c->second.endpoints.erase(it);
    state_->recompute_and_refresh(cluster, c->second, service_key, pending);
  }
  State::notify(pending);
}

void EndpointIndex::upsert_pod(const std::string& cluster, std::shared_ptr<const client::Pod> pod) {
  State::Pending pending;
  {
    std::lock_guard lock(state_->mu);
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
  }
  State::notify(pending);
}

void EndpointIndex::remove_pod(const std::string& cluster, std::string_view key) {
  State::Pending pending;
  {
    std::lock_guard lock(state_->mu);
    auto c = state_->clusters.find(cluster);
    if (c == state_->clusters.end()) return;
    auto it = c->second.pods.find(key);
    if (it == c->second.pods.end()) return;
    std::shared_ptr<const client::Pod> old = it->second;
    std::string pod_key = it->first;
    c->second.pods.erase(it);
    static const client::StringMap kNoLabels;
    state_->pod_changed(cluster, c->second, pod_key, &old->metadata.labels, kNoLabels, pending);
  }
  State::notify(pending);
}

void EndpointIndex::remove_cluster(const std::string& cluster) {
  State::Pending pending;
  {
    std::lock_guard lock(state_->mu);
    auto c = state_->clusters.find(cluster);
    if (c == state_->clusters.end()) return;
    std::vector<std::string> services;
    for (const auto& [service_key, shard] : c->second.shards) services.push_back(service_key);
    state_->clusters.erase(c);
    ++state_->version;
    for (const auto& service_key : services) {
      state_->refresh(service_key, cluster, nullptr, pending);
    }
  }
  State::notify(pending);
}

EndpointIndex::Watch EndpointIndex::watch(const EndpointQuery& query, Callback callback,
                                          EndpointSnapshotPtr* current) {
  LabelSelector selector = query.selector.value_or(LabelSelector());
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
  return Watch(state_, std::move(key), id);
}

EndpointSnapshotPtr EndpointIndex::snapshot(const EndpointQuery& query) const {
  LabelSelector selector = query.selector.value_or(LabelSelector());
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
  for (const auto& [key, slice] : c->second.slices) out.slices.push_back(key);
  for (const auto& [key, e] : c->second.endpoints) out.endpoints.push_back(key);
  for (const auto& [key, pod] : c->second.pods) out.pods.push_back(key);
  return out;
}

std::uint64_t EndpointIndex::version() const {
  std::lock_guard lock(state_->mu);
  return state_->version;
}

}  // namespace kinformer::cache
