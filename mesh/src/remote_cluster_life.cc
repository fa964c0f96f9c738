#include "remote_cluster_life.h"

#include <algorithm>
#include <atomic>
#include <utility>

namespace kinformer::mesh::detail {
namespace {

// How long a failed GET /version waits before the next.
constexpr std::chrono::milliseconds kProbeRetry{5000};

}  // namespace

RegistryMetrics::RegistryMetrics(informer::MetricsRegistry& r)
    : clusters(
          r.gauge("kinformer_clusters", "Remote clusters the ClusterRegistry manages, by state")),
      sync_timeouts(r.counter("kinformer_cluster_sync_timeouts_total",
                              "Remote cluster clients that did not sync within sync_timeout")),
      refusals(r.counter("kinformer_cluster_kubeconfig_refusals_total",
                         "Remote kubeconfigs refused, by field (\"invalid\": malformed)")),
      changes(r.counter("kinformer_cluster_updates_total",
                        "Remote cluster changes told to subscribers, by kind (added, updated, "
                        "removed)")) {}

const char* to_string(ClusterEvent::Kind kind) noexcept {
  switch (kind) {
    case ClusterEvent::Kind::added:
      return "added";
    case ClusterEvent::Kind::updated:
      return "updated";
    case ClusterEvent::Kind::synced:
      return "synced";
    case ClusterEvent::Kind::removed:
      return "removed";
  }
  return "unknown";
}

Built build_remote(const std::string& id, const WantedCluster& wanted, std::uint64_t generation,
                   const RemoteSettings& settings) {
  const std::string origin = "secret " + wanted.secret + ", key '" + id + "'";
  try {
    client::ClusterConfig config = client::ClusterConfig::from_kubeconfig_data(
        wanted.kubeconfig, {.origin = origin, .context = std::nullopt, .policy = settings.policy});
    auto rest = std::make_shared<client::RestClient>(std::move(config), settings.client);
    auto factory = std::make_shared<informer::InformerFactory>(
        [rest](const client::ResourceType& type, const std::string& ns) {
          return rest->lister_watcher(type, ns);
        },
        settings.factory);
    if (settings.on_synced) factory->on_informer_synced(settings.on_synced);
    auto cluster = std::make_shared<RemoteCluster>();
    cluster->id = id;
    cluster->secret = wanted.secret;
    cluster->generation = generation;
    static std::atomic<std::uint64_t> epochs{0};
    cluster->epoch = ++epochs;
    cluster->client = std::move(rest);
    cluster->factory = std::move(factory);
    return Built{.cluster = std::move(cluster)};
  } catch (const client::KubeconfigRefused& e) {
    return Built{.refused = e.what(), .field = e.field()};
  } catch (const std::exception& e) {  // ConfigError: malformed, unusable server URL or CA
    return Built{.refused = e.what(), .field = "invalid"};
  }
}

RemoteClusterLife::RemoteClusterLife(std::string id, std::chrono::milliseconds sync_timeout,
                                     const client::Logger& log, RegistryMetrics& metrics)
    : id_(std::move(id)), log_(log), metrics_(metrics), sync_timeout_(sync_timeout) {}

std::optional<ClusterEvent> RemoteClusterLife::apply(const WantedCluster& wanted, Built built,
                                                     std::vector<RemoteClusterPtr>& retire) {
  kubeconfig_ = wanted.kubeconfig;
  secret_ = wanted.secret;
  if (!built.cluster) {
    log_.warn("remote kubeconfig refused", {{"cluster", id_},
                                            {"secret", wanted.secret},
                                            {"field", built.field},
                                            {"error", built.refused}});
    metrics_.refusals.add({{"field", built.field}}).increment();
    refused_ = std::move(built.refused);
    if (!active_) settled_ = true;
    if (pending_) retire.push_back(std::exchange(pending_, nullptr));
    return std::nullopt;
  }
  RemoteClusterPtr cluster = std::move(built.cluster);
  generation_ = cluster->generation;
  refused_.clear();
  if (active_) {
    // Make-before-break: the new client runs every informer the old one has; subscribers move
    // once it has synced (settle()).
    copy_informers(*active_, *cluster);
    cluster->factory->start();
    if (pending_) retire.push_back(std::exchange(pending_, nullptr));
    pending_ = std::move(cluster);
    pending_since_ = SteadyClock::now();
    log_.info(
        "remote cluster kubeconfig changed; syncing the new client",
        {{"cluster", id_}, {"secret", wanted.secret}, {"generation", std::to_string(generation_)}});
    return std::nullopt;
  }
  cluster->factory->start();
  active_ = cluster;
  active_since_ = SteadyClock::now();
  timed_out_ = false;
  settled_ = false;
  log_.info("remote cluster added", {{"cluster", id_}, {"secret", wanted.secret}});
  return ClusterEvent{.kind = ClusterEvent::Kind::added, .now = std::move(cluster)};
}

std::vector<ClusterEvent> RemoteClusterLife::settle(SteadyClock::time_point now,
                                                    std::vector<RemoteClusterPtr>& retire) {
  std::vector<ClusterEvent> events;
  if (pending_) {
    // Informers a component created on the active client since the change join the new one.
    copy_informers(*active_, *pending_);
    const bool synced = pending_->factory->has_synced();
    if (synced || now - pending_since_ >= sync_timeout_) {
      if (!synced) {
        metrics_.sync_timeouts.add({{"cluster", id_}}).increment();
        auto e = pending_->factory->last_error();
        log_.warn("the new client did not sync in time; switching to it anyway",
                  {{"cluster", id_}, {"error", e ? e->to_string() : "no error reported"}});
      }
      RemoteClusterPtr before = std::exchange(active_, std::exchange(pending_, nullptr));
      active_since_ = pending_since_;
      timed_out_ = !synced;
      settled_ = true;
      events.push_back(
          ClusterEvent{.kind = ClusterEvent::Kind::updated, .now = active_, .before = before});
      retire.push_back(std::move(before));
    }
  }
  // The active client's own sync and timeout are looked at also while a new one syncs: its
  // deadline passes once and it is then settled (next_deadline() never returns a passed time).
  if (!active_) return events;
  if (synced_told_ != active_->generation && synced(*active_)) {
    synced_told_ = active_->generation;
    settled_ = true;
    log_.info("remote cluster synced",
              {{"cluster", id_}, {"generation", std::to_string(active_->generation)}});
    events.push_back(ClusterEvent{.kind = ClusterEvent::Kind::synced, .now = active_});
    return events;
  }
  if (!settled_ && now - active_since_ >= sync_timeout_) {
    settled_ = true;
    timed_out_ = true;
    metrics_.sync_timeouts.add({{"cluster", id_}}).increment();
    auto e = active_->factory->last_error();
    log_.warn("remote cluster did not sync within the sync timeout; still retrying",
              {{"cluster", id_}, {"error", e ? e->to_string() : "no error reported"}});
  }
  return events;
}

std::optional<RemoteClusterLife::ProbeDue> RemoteClusterLife::probe_due(
    SteadyClock::time_point now) {
  if (!active_ || probe_queued_ || active_->factory->informer_count() != 0) return std::nullopt;
  const bool retry = probed_ == active_->generation;
  if (retry && (probe_ok_ || now < next_probe_)) return std::nullopt;
  probe_queued_ = true;
  return ProbeDue{active_, retry};
}

void RemoteClusterLife::probe_done(std::uint64_t generation, std::string error,
                                   SteadyClock::time_point now) {
  probe_queued_ = false;
  if (!active_ || active_->generation != generation) return;
  probed_ = generation;
  probe_ok_ = error.empty();
  probe_error_ = std::move(error);
  next_probe_ = now + kProbeRetry;
}

SteadyClock::time_point RemoteClusterLife::next_deadline() const {
  auto at = SteadyClock::time_point::max();
  if (pending_) at = std::min(at, pending_since_ + sync_timeout_);
  if (active_ && !settled_) at = std::min(at, active_since_ + sync_timeout_);
  if (active_ && !probe_queued_ && probed_ == active_->generation && !probe_ok_ &&
      active_->factory->informer_count() == 0) {
    at = std::min(at, next_probe_);
  }
  return at;
}

bool RemoteClusterLife::synced(const RemoteCluster& cluster) const {
  // With no informer there is nothing to sync; GET /version says it is reachable.
  if (cluster.factory->informer_count() == 0) {
    return probed_ == cluster.generation && probe_ok_;
  }
  return cluster.factory->has_synced();
}

void RemoteClusterLife::copy_informers(const RemoteCluster& from, const RemoteCluster& to) const {
  for (const informer::InformerSpec& spec : from.factory->informer_specs()) {
    try {
      (void)to.factory->informer(spec.type, spec.options);  // an existing key is returned as is
    } catch (const std::exception& e) {
      log_.warn("cannot recreate an informer on the new client",
                {{"cluster", id_}, {"error", e.what()}});
    }
  }
}

ClusterStatus RemoteClusterLife::status() const {
  ClusterStatus s;
  s.id = id_;
  s.secret = secret_;
  s.generation = generation_;
  if (!active_) {
    s.state = ClusterState::refused;
    s.reason = refused_;
    return s;
  }
  const informer::InformerFactory& f = *active_->factory;
  s.informers = f.informer_count();
  s.freshness = f.freshness();
  std::optional<std::string> error;
  if (auto e = f.last_error()) error = e->to_string();
  if (s.informers == 0 && probed_ == active_->generation && !probe_ok_) error = probe_error_;
  if (synced(*active_)) {
    s.state = error ? ClusterState::unreachable : ClusterState::synced;
  } else if (timed_out_) {
    s.state = ClusterState::timed_out;
  } else {
    s.state = error ? ClusterState::unreachable : ClusterState::syncing;
  }
  if (error) s.reason = *error;
  auto also = [&](const std::string& why) { s.reason += (s.reason.empty() ? "" : "; ") + why; };
  if (pending_) also("a new kubeconfig is syncing");
  if (!refused_.empty()) {
    s.state = ClusterState::refused;
    also(refused_ + " (still using the previous kubeconfig)");
  }
  return s;
}

std::vector<RemoteClusterPtr> RemoteClusterLife::release() {
  std::vector<RemoteClusterPtr> out;
  if (pending_) out.push_back(std::exchange(pending_, nullptr));
  if (active_) out.push_back(std::exchange(active_, nullptr));
  return out;
}

}  // namespace kinformer::mesh::detail
