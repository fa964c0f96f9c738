#include "kinformer/mesh/cluster_registry.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <algorithm>
#include <set>
#include <stdexcept>
#include <utility>

#include "kinformer/cache/label_selector.h"
#include "kinformer/client/secret.h"

namespace kinformer::mesh {

using SteadyClock = std::chrono::steady_clock;

namespace {
// The prober's GET /version for a remote client that has no informer yet.
constexpr std::chrono::milliseconds kProbeTimeout{5000};
constexpr std::chrono::milliseconds kProbeRetry{5000};
}  // namespace

std::string_view to_string(ClusterState state) noexcept {
  switch (state) {
    case ClusterState::syncing:
      return "syncing";
    case ClusterState::synced:
      return "synced";
    case ClusterState::timed_out:
      return "timed_out";
    case ClusterState::refused:
      return "refused";
    case ClusterState::unreachable:
      return "unreachable";
  }
  return "unknown";
}

// ---- subscriptions ----

struct ClusterSubscription::State {
  explicit State(ClusterHandler h) : handler(std::move(h)) {}
  ClusterHandler handler;
  std::mutex mu;
  std::condition_variable cv;
  bool closed = false;       // guarded by mu
  bool running = false;      // guarded by mu
  std::thread::id runner;    // guarded by mu
  bool needs_replay = true;  // guarded by the registry's mu_

  // Runs one call unless closed; close() waits for it (except from inside it). Returns what an
  // exception said ("" when none): a component's exception must not stop the registry.
  std::string call(const std::function<void(const ClusterHandler&)>& fn) {
    {
      std::lock_guard lock(mu);
      if (closed) return {};
      running = true;
      runner = std::this_thread::get_id();
    }
    std::string thrown;
    try {
      fn(handler);
    } catch (const std::exception& e) {
      thrown = e.what()[0] != '\0' ? e.what() : "exception";
    } catch (...) {
      thrown = "non-standard exception";
    }
    std::lock_guard lock(mu);
    running = false;
    cv.notify_all();
    return thrown;
  }
};

ClusterSubscription& ClusterSubscription::operator=(ClusterSubscription&& other) noexcept {
  if (this != &other) {
    close();
    state_ = std::move(other.state_);
  }
  return *this;
}

void ClusterSubscription::close() {
  auto state = state_.lock();
  state_.reset();
  if (!state) return;
  std::unique_lock lock(state->mu);
  state->closed = true;
  if (state->running && state->runner == std::this_thread::get_id()) {
    return;  // from inside its own call
  }
  state->cv.wait(lock, [&] { return !state->running; });
}

// ---- per-cluster state ----

struct ClusterRegistry::Entry {
  std::string secret;
  std::string kubeconfig;  // what was last applied (built or refused)
  std::uint64_t generation = 0;
  RemoteClusterPtr active;   // what subscribers use; null while refused
  RemoteClusterPtr pending;  // make-before-break: the new client, syncing
  SteadyClock::time_point active_since{};
  SteadyClock::time_point pending_since{};
  bool timed_out = false;         // active did not sync within sync_timeout
  bool settled = false;           // sticky: active synced or timed out, or refused
  std::uint64_t synced_told = 0;  // the generation whose `synced` subscribers got
  std::string refused;            // why the latest kubeconfig was refused; empty otherwise
  // Reachability of the active client while it has no informer (a GET /version by the prober).
  std::uint64_t probed = 0;  // generation the result is for
  bool probe_ok = false;
  std::string probe_error;
  bool probe_queued = false;
  SteadyClock::time_point next_probe{};
};

struct ClusterRegistry::Metrics {
  explicit Metrics(prometheus::Registry& r)
      : clusters(prometheus::BuildGauge()
                     .Name("kinformer_clusters")
                     .Help("Remote clusters the ClusterRegistry manages, by state")
                     .Register(r)),
        sync_timeouts(prometheus::BuildCounter()
                          .Name("kinformer_cluster_sync_timeouts_total")
                          .Help("Remote cluster clients that did not sync within sync_timeout")
                          .Register(r)),
        refusals(prometheus::BuildCounter()
                     .Name("kinformer_cluster_kubeconfig_refusals_total")
                     .Help("Remote kubeconfigs refused, by field (\"invalid\": malformed)")
                     .Register(r)),
        changes(
            prometheus::BuildCounter()
                .Name("kinformer_cluster_updates_total")
                .Help(
                    "Remote cluster changes told to subscribers, by kind (added, updated, removed)")
                .Register(r)) {}
  prometheus::Family<prometheus::Gauge>& clusters;
  prometheus::Family<prometheus::Counter>& sync_timeouts;
  prometheus::Family<prometheus::Counter>& refusals;
  prometheus::Family<prometheus::Counter>& changes;
};

// ---- the registry ----

ClusterRegistry::ClusterRegistry(std::shared_ptr<client::RestClient> local_client,
                                 std::shared_ptr<informer::InformerFactory> local_factory,
                                 ClusterRegistryOptions options)
    : local_client_(std::move(local_client)),
      local_factory_(std::move(local_factory)),
      options_(std::move(options)),
      log_(options_.log, "cluster-registry", {{"namespace", options_.secret_namespace}}) {
  if (!local_client_ || !local_factory_) {
    throw client::ConfigError("ClusterRegistry: a local client and factory are required");
  }
  if (options_.secret_namespace.empty()) {
    throw client::ConfigError("ClusterRegistry: secret_namespace is required");
  }
  options_.label_selector = cache::LabelSelector::parse(options_.label_selector).to_string();
  if (!options_.registry) options_.registry = local_factory_->registry_ptr();
  if (!options_.remote_client.log) options_.remote_client.log = options_.log;
  if (!options_.remote_factory.log) options_.remote_factory.log = options_.log;
  metrics_ = std::make_unique<Metrics>(*options_.registry);
  for (ClusterState s : {ClusterState::syncing, ClusterState::synced, ClusterState::timed_out,
                         ClusterState::refused, ClusterState::unreachable}) {
    metrics_->clusters.Add({{"state", std::string(to_string(s))}}).Set(0);
  }
  worker_ = std::thread([this] { run(); });
  worker_id_ = worker_.get_id();  // read by shutdown(), which happens after construction
  prober_ = std::thread([this] { probe_loop(); });
  reaper_ = std::thread([this] {
    std::unique_lock lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return reaper_done_ || !retiring_.empty(); });
      if (retiring_.empty()) return;  // shutdown() joined the worker: nothing more comes
      auto cluster = std::move(retiring_.front());
      retiring_.erase(retiring_.begin());
      lock.unlock();
      cluster->factory->shutdown();
      lock.lock();
    }
  });
}

// NOLINTNEXTLINE(bugprone-exception-escape): bad_alloc, or shutdown() on its own worker: terminate
ClusterRegistry::~ClusterRegistry() { shutdown(); }

client::Status ClusterRegistry::start() {
  return once_.run([this] { return start_once(); });
}

client::Status ClusterRegistry::start_once() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) {
      return client::Error{.code = client::Errc::cancelled,
                           .message = "ClusterRegistry: shut down"};
    }
  }
  // One request before any watch: a registry that may not read its Secrets (403) says so now,
  // and the failed start leaves no informer behind to retry on its own.
  client::ListOptions probe;
  probe.label_selector = options_.label_selector;
  probe.limit = 1;
  auto listed = local_client_->list(client::ResourceTraits<client::Secret>::type(),
                                    options_.secret_namespace, probe);
  if (!listed) {
    client::Error e = std::move(listed).error();
    e.message = "ClusterRegistry: cannot list Secrets in namespace " + options_.secret_namespace +
                " (" + options_.label_selector + "): " + e.message;
    log_.warn("cannot list the cluster Secrets", {{"error", e.to_string()}});
    return e;
  }
  if (!secrets_) {
    secrets_ = &local_factory_->informer(
        client::ResourceTraits<client::Secret>::type(),
        {.namespace_ = options_.secret_namespace, .label_selector = options_.label_selector});
    auto handler = std::make_shared<informer::ResourceEventHandlerFuncs>();
    handler->add = [this](const client::ObjectPtr& o, bool) { on_secret(o, false); };
    handler->update = [this](const client::ObjectPtr&, const client::ObjectPtr& o) {
      on_secret(o, false);
    };
    handler->del = [this](const client::ObjectPtr& o, bool) { on_secret(o, true); };
    informer::Registration registration = secrets_->add_handler(handler, {.name = "cluster-registry"});
    std::unique_lock lock(mu_);
    if (stopping_) {
      lock.unlock();
      registration.close();
      secrets_ = nullptr;
      return client::Error{.code = client::Errc::cancelled,
                           .message = "ClusterRegistry: shut down"};
    }
    secret_handler_ = std::move(registration);
    secrets_registered_ = true;
  }
  local_factory_->start();
  if (!secrets_->wait_for_sync(options_.start_timeout)) {
    std::string why = "ClusterRegistry: the Secrets of namespace " + options_.secret_namespace +
                      " did not sync within " + std::to_string(options_.start_timeout.count()) +
                      " ms";
    if (auto e = secrets_->last_error()) why += ": " + e->to_string();
    return client::Error{.code = client::Errc::timeout, .message = why};
  }
  std::lock_guard lock(mu_);
  ++changes_;  // has_synced() waits for the worker to have looked at the initial list
  cv_.notify_all();
  return client::Ok{};
}

void ClusterRegistry::on_secret(const client::ObjectPtr& object, bool deleted) {
  const auto& secret = static_cast<const client::Secret&>(*object);
  std::map<std::string, std::string> ids;
  if (!deleted) {
    for (const auto& [key, value] : secret.data) ids.emplace(key, value);
  }
  std::lock_guard lock(mu_);
  if (ids.empty()) {
    secrets_seen_.erase(secret.key());
  } else {
    secrets_seen_[secret.key()] = std::move(ids);
  }
  ++changes_;
  cv_.notify_all();
}

ClusterSubscription ClusterRegistry::subscribe(ClusterHandler handler) {
  auto state = std::make_shared<ClusterSubscription::State>(std::move(handler));
  std::lock_guard lock(mu_);
  if (stopping_) return ClusterSubscription();
  subscribers_.push_back(state);
  ++changes_;  // the worker replays the known clusters to it
  cv_.notify_all();
  return ClusterSubscription(state);
}

void ClusterRegistry::run() {
  std::unique_lock lock(mu_);
  std::uint64_t seen = 0;
  while (!stopping_) {
    seen = changes_;
    reconcile(lock);
    if (stopping_) break;
    cv_.wait_until(lock, next_deadline(), [&] { return stopping_ || changes_ != seen; });
  }
}

SteadyClock::time_point ClusterRegistry::next_deadline() const {
  // Syncing clusters are looked at every 50 ms (has_synced() has no callback); settled ones
  // wait for the next Secret event.
  auto wait = std::chrono::milliseconds(5000);
  // The Secret handler has not yet seen the initial list: has_synced() waits for the next look.
  if (secrets_registered_ && !reconciled_after_sync_) wait = std::chrono::milliseconds(20);
  for (const auto& [id, entry] : entries_) {
    if (entry->pending || (entry->active && !entry->settled)) {
      wait = std::min(wait, std::chrono::milliseconds(50));
    }
    if (entry->active && entry->synced_told != entry->active->generation) {
      wait = std::min(wait, std::chrono::milliseconds(500));
    }
  }
  return SteadyClock::now() + wait;
}

void ClusterRegistry::notify(const std::function<void(const ClusterHandler&)>& call,
                             std::unique_lock<std::mutex>& lock) {
  std::vector<std::shared_ptr<ClusterSubscription::State>> targets;
  for (const auto& s : subscribers_) {
    if (!s->needs_replay) targets.push_back(s);
  }
  lock.unlock();
  for (const auto& s : targets) report(s->call(call));
  lock.lock();
}

void ClusterRegistry::report(const std::string& thrown) const {
  if (!thrown.empty()) {
    log_.error("a cluster subscriber threw; the registry goes on", {{"error", thrown}});
  }
}

void ClusterRegistry::retire(RemoteClusterPtr cluster) {
  if (!cluster) return;
  retiring_.push_back(std::move(cluster));
  cv_.notify_all();
}

void ClusterRegistry::reconcile(std::unique_lock<std::mutex>& lock) {
  // New subscribers first learn what exists (and are skipped by notify() until then).
  std::erase_if(subscribers_, [](const auto& s) {
    std::lock_guard l(s->mu);
    return s->closed;
  });
  // A copy: the lock is released around each call, and subscribe() may grow subscribers_.
  std::vector<std::shared_ptr<ClusterSubscription::State>> fresh;
  for (const auto& s : subscribers_) {
    if (s->needs_replay) fresh.push_back(s);
  }
  for (const auto& s : fresh) {
    s->needs_replay = false;
    std::vector<RemoteClusterPtr> known;
    for (const auto& [id, entry] : entries_) {
      if (entry->active) known.push_back(entry->active);
    }
    lock.unlock();
    for (const auto& c : known) {
      report(s->call([&](const ClusterHandler& h) {
        if (h.added) h.added(c);
      }));
    }
    lock.lock();
    if (stopping_) return;
  }

  // Read before secrets_seen_: once the handler has synced, every initial Secret is in it.
  const bool initial_list_seen = secrets_registered_ && secret_handler_.has_synced();
  // What the Secrets say now: cluster ID -> (secret, kubeconfig); the first Secret (by
  // namespace/name) wins an ID that two Secrets hold.
  std::map<std::string, Desired> desired;
  std::set<std::string> ignored;  // "id\nsecret" ignored now; each is logged when it starts
  for (const auto& [secret, ids] : secrets_seen_) {
    for (const auto& [id, kubeconfig] : ids) {
      std::string ignored_key = id;
      ignored_key += '\n';
      ignored_key += secret;
      if (id == options_.local_cluster_id) {
        if (ignored.insert(ignored_key).second && !ignored_.contains(ignored_key)) {
          log_.warn("ignoring a remote kubeconfig named like the local cluster",
                    {{"cluster", id}, {"secret", secret}});
        }
        continue;
      }
      auto [it, inserted] = desired.try_emplace(id, Desired{secret, kubeconfig});
      if (!inserted && ignored.insert(ignored_key).second && !ignored_.contains(ignored_key)) {
        log_.warn("ignoring a cluster ID held by two Secrets",
                  {{"cluster", id}, {"secret", secret}, {"kept", it->second.secret}});
      }
    }
  }

  ignored_ = std::move(ignored);

  // Removed IDs.
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (desired.contains(it->first)) {
      ++it;
      continue;
    }
    std::string id = it->first;
    std::unique_ptr<Entry> entry = std::move(it->second);
    it = entries_.erase(it);
    log_.info("remote cluster removed", {{"cluster", id}, {"secret", entry->secret}});
    if (entry->active) {
      RemoteClusterPtr before = entry->active;
      metrics_->changes.Add({{"kind", "removed"}}).Increment();
      notify(
          [&](const ClusterHandler& h) {
            if (h.removed) h.removed(before);
          },
          lock);
    }
    retire(entry->pending);
    retire(entry->active);
    if (stopping_) return;
    it = entries_.upper_bound(id);  // notify() released the lock; only this thread edits entries_
  }

  // New and changed IDs.
  for (auto& [id, want] : desired) {
    auto it = entries_.find(id);
    if (it == entries_.end()) it = entries_.emplace(id, std::make_unique<Entry>()).first;
    Entry& entry = *it->second;
    entry.secret = want.secret;  // an ID moved to another Secret with the same content: no rebuild
    if (entry.kubeconfig != want.kubeconfig) build(id, entry, want, lock);
    if (stopping_) return;
  }
  for (auto& [id, entry] : entries_) {
    settle(id, *entry, lock);
    if (stopping_) return;
  }

  std::map<ClusterState, double> by_state;
  for (const auto& [id, entry] : entries_) by_state[status_of(id, *entry).state] += 1;
  for (ClusterState s : {ClusterState::syncing, ClusterState::synced, ClusterState::timed_out,
                         ClusterState::refused, ClusterState::unreachable}) {
    metrics_->clusters.Add({{"state", std::string(to_string(s))}}).Set(by_state[s]);
  }
  if (initial_list_seen) reconciled_after_sync_ = true;
  cv_.notify_all();  // wait_for_sync()
}

void ClusterRegistry::build(const std::string& id, Entry& entry, const Desired& want,
                            std::unique_lock<std::mutex>& lock) {
  entry.kubeconfig = want.kubeconfig;
  entry.secret = want.secret;
  const std::string origin = "secret " + want.secret + ", key '" + id + "'";
  const std::uint64_t generation = entry.generation + 1;
  RemoteClusterPtr built;
  std::string refused;
  std::string field;
  lock.unlock();
  try {
    client::ClusterConfig config = client::ClusterConfig::from_kubeconfig_data(
        want.kubeconfig,
        {.origin = origin, .context = std::nullopt, .policy = options_.kubeconfig_policy});
    auto rest = std::make_shared<client::RestClient>(std::move(config), options_.remote_client);
    auto factory = std::make_shared<informer::InformerFactory>(
        [rest](const client::ResourceType& type, const std::string& ns) {
          return rest->lister_watcher(type, ns);
        },
        options_.remote_factory);
    auto cluster = std::make_shared<RemoteCluster>();
    cluster->id = id;
    cluster->secret = want.secret;
    cluster->generation = generation;
    cluster->client = std::move(rest);
    cluster->factory = std::move(factory);
    built = std::move(cluster);
  } catch (const client::KubeconfigRefused& e) {
    refused = e.what();
    field = e.field();
  } catch (
      const std::exception& e) {  // ConfigError: malformed kubeconfig, unusable server URL or CA
    refused = e.what();
    field = "invalid";
  }
  lock.lock();

  if (!built) {
    log_.warn("remote kubeconfig refused",
              {{"cluster", id}, {"secret", want.secret}, {"field", field}, {"error", refused}});
    metrics_->refusals.Add({{"field", field}}).Increment();
    // A working cluster whose kubeconfig is edited into something refused keeps its current
    // client (a typo must not become an outage); only deleting the key removes it. A new
    // client still syncing for an earlier edit is dropped.
    entry.refused = refused;
    if (!entry.active) entry.settled = true;
    retire(std::exchange(entry.pending, nullptr));
    return;
  }

  entry.generation = generation;
  entry.refused.clear();
  if (entry.active) {
    // Make-before-break: the new client runs every informer the old one has; subscribers move
    // once it has synced (settle()).
    for (const informer::InformerSpec& spec : entry.active->factory->informer_specs()) {
      try {
        (void)built->factory->informer(spec.type, spec.options);
      } catch (const std::exception& e) {
        log_.warn("cannot recreate an informer on the new client",
                  {{"cluster", id}, {"error", e.what()}});
      }
    }
    built->factory->start();
    retire(std::exchange(entry.pending, built));
    entry.pending_since = SteadyClock::now();
    log_.info(
        "remote cluster kubeconfig changed; syncing the new client",
        {{"cluster", id}, {"secret", want.secret}, {"generation", std::to_string(generation)}});
    return;
  }
  built->factory->start();
  entry.active = built;
  entry.active_since = SteadyClock::now();
  entry.timed_out = false;
  entry.settled = false;
  log_.info("remote cluster added", {{"cluster", id}, {"secret", want.secret}});
  metrics_->changes.Add({{"kind", "added"}}).Increment();
  notify(
      [&](const ClusterHandler& h) {
        if (h.added) h.added(built);
      },
      lock);
}

bool ClusterRegistry::synced(const Entry& entry, const RemoteCluster& cluster) const {
  // With no informer there is nothing to sync; the prober's GET /version says it is reachable.
  if (cluster.factory->informer_count() == 0) {
    return entry.probed == cluster.generation && entry.probe_ok;
  }
  return cluster.factory->has_synced();
}

void ClusterRegistry::copy_informers(const std::string& id, const RemoteCluster& from,
                                     const RemoteCluster& to) {
  for (const informer::InformerSpec& spec : from.factory->informer_specs()) {
    try {
      (void)to.factory->informer(spec.type, spec.options);  // an existing key is returned as is
    } catch (const std::exception& e) {
      log_.warn("cannot recreate an informer on the new client",
                {{"cluster", id}, {"error", e.what()}});
    }
  }
}

void ClusterRegistry::settle(const std::string& id, Entry& entry,
                             std::unique_lock<std::mutex>& lock) {
  const auto now = SteadyClock::now();
  if (entry.active && entry.active->factory->informer_count() == 0 && !entry.probe_queued &&
      (entry.probed != entry.active->generation || (!entry.probe_ok && now >= entry.next_probe))) {
    entry.probe_queued = true;
    probes_.push_back(entry.active);
    cv_.notify_all();
  }
  if (entry.pending) {
    // Informers a component created on the active client since the rebuild join the new one.
    copy_informers(id, *entry.active, *entry.pending);
    bool synced = entry.pending->factory->has_synced();
    if (synced || now - entry.pending_since >= options_.sync_timeout) {
      if (!synced) {
        metrics_->sync_timeouts.Add({{"cluster", id}}).Increment();
        auto e = entry.pending->factory->last_error();
        log_.warn("the new client did not sync in time; switching to it anyway",
                  {{"cluster", id}, {"error", e ? e->to_string() : "no error reported"}});
      }
      RemoteClusterPtr before = std::exchange(entry.active, std::exchange(entry.pending, nullptr));
      RemoteClusterPtr after = entry.active;
      entry.active_since = entry.pending_since;
      entry.timed_out = !synced;
      entry.settled = true;
      metrics_->changes.Add({{"kind", "updated"}}).Increment();
      notify(
          [&](const ClusterHandler& h) {
            if (h.updated) h.updated(after, before);
          },
          lock);
      retire(before);
    }
    return;
  }
  if (!entry.active) return;
  if (entry.synced_told != entry.active->generation && synced(entry, *entry.active)) {
    entry.synced_told = entry.active->generation;
    entry.settled = true;
    log_.info("remote cluster synced",
              {{"cluster", id}, {"generation", std::to_string(entry.active->generation)}});
    RemoteClusterPtr c = entry.active;
    notify(
        [&](const ClusterHandler& h) {
          if (h.synced) h.synced(c);
        },
        lock);
    return;
  }
  if (entry.settled) return;
  if (now - entry.active_since >= options_.sync_timeout) {
    entry.settled = true;
    entry.timed_out = true;
    metrics_->sync_timeouts.Add({{"cluster", id}}).Increment();
    auto e = entry.active->factory->last_error();
    log_.warn("remote cluster did not sync within the sync timeout; still retrying",
              {{"cluster", id}, {"error", e ? e->to_string() : "no error reported"}});
  }
}

ClusterStatus ClusterRegistry::status_of(const std::string& id, const Entry& entry) const {
  ClusterStatus s;
  s.id = id;
  s.secret = entry.secret;
  s.generation = entry.generation;
  if (!entry.active) {
    s.state = ClusterState::refused;
    s.reason = entry.refused;
    return s;
  }
  const informer::InformerFactory& f = *entry.active->factory;
  s.informers = f.informer_count();
  std::optional<std::string> error;
  if (auto e = f.last_error()) error = e->to_string();
  if (s.informers == 0 && entry.probed == entry.active->generation && !entry.probe_ok) {
    error = entry.probe_error;
  }
  if (synced(entry, *entry.active)) {
    s.state = error ? ClusterState::unreachable : ClusterState::synced;
  } else if (entry.timed_out) {
    s.state = ClusterState::timed_out;
  } else {
    s.state = error ? ClusterState::unreachable : ClusterState::syncing;
  }
  if (error) s.reason = *error;
  auto also = [&](const std::string& why) { s.reason += (s.reason.empty() ? "" : "; ") + why; };
  if (entry.pending) also("a new kubeconfig is syncing");
  if (!entry.refused.empty()) {
    s.state = ClusterState::refused;
    also(entry.refused + " (still using the previous kubeconfig)");
  }
  return s;
}

std::shared_ptr<informer::InformerFactory> ClusterRegistry::factory(std::string_view id) const {
  if (id == options_.local_cluster_id) return local_factory_;
  auto c = cluster(id);
  return c ? c->factory : nullptr;
}

RemoteClusterPtr ClusterRegistry::cluster(std::string_view id) const {
  std::lock_guard lock(mu_);
  auto it = entries_.find(id);
  return it == entries_.end() ? nullptr : it->second->active;
}

std::vector<ClusterStatus> ClusterRegistry::clusters() const {
  std::vector<ClusterStatus> out;
  ClusterStatus local;
  local.id = options_.local_cluster_id;
  local.local = true;
  local.informers = local_factory_->informer_count();
  auto error = local_factory_->last_error();
  local.state = error                          ? ClusterState::unreachable
                : local_factory_->has_synced() ? ClusterState::synced
                                               : ClusterState::syncing;
  if (error) local.reason = error->to_string();
  out.push_back(std::move(local));
  std::lock_guard lock(mu_);
  for (const auto& [id, entry] : entries_) out.push_back(status_of(id, *entry));
  return out;
}

bool ClusterRegistry::has_synced() const {
  if (!once_.done() || !secret_handler_.has_synced() || !local_factory_->has_synced()) return false;
  std::lock_guard lock(mu_);
  // The worker has looked at the Secrets since the handler saw the initial list.
  if (!reconciled_after_sync_) return false;
  return std::all_of(entries_.begin(), entries_.end(),
                     [](const auto& e) { return e.second->settled; });
}

bool ClusterRegistry::wait_for_sync(std::chrono::milliseconds timeout) const {
  auto deadline = SteadyClock::now() + timeout;
  std::unique_lock lock(mu_);
  for (;;) {
    lock.unlock();
    if (has_synced()) return true;
    lock.lock();
    if (SteadyClock::now() >= deadline) return false;
    cv_.wait_until(lock, std::min(deadline, SteadyClock::now() + std::chrono::milliseconds(50)));
  }
}

void ClusterRegistry::shutdown() {
  if (std::this_thread::get_id() == worker_id_) {
    throw std::logic_error(
        "ClusterRegistry::shutdown() called from a ClusterHandler (the registry's own thread)");
  }
  std::lock_guard serial(shutdown_mu_);  // a second caller waits for the first, then returns
  {
    std::lock_guard lock(mu_);
    if (shut_down_) return;
    stopping_ = true;
    cv_.notify_all();
  }
  if (worker_.joinable()) worker_.join();
  if (prober_.joinable()) prober_.join();
  secret_handler_.close();
  std::vector<RemoteClusterPtr> left;
  {
    std::lock_guard lock(mu_);
    for (auto& [id, entry] : entries_) {
      if (entry->pending) left.push_back(std::move(entry->pending));
      if (entry->active) left.push_back(std::move(entry->active));
    }
    entries_.clear();
    probes_.clear();
    reaper_done_ = true;  // the worker is joined: whatever it retired is in retiring_
    cv_.notify_all();
  }
  if (reaper_.joinable()) reaper_.join();  // drains retiring_ first
  for (auto& c : left) c->factory->shutdown();
  std::lock_guard lock(mu_);
  shut_down_ = true;
}

void ClusterRegistry::probe_loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !probes_.empty(); });
    if (stopping_) return;
    RemoteClusterPtr cluster = std::move(probes_.front());
    probes_.erase(probes_.begin());
    lock.unlock();
    // Its own client with a short deadline: a blackholed server delays the next probe (and
    // shutdown) by at most probe_timeout, never the clusters' informers.
    client::RestClientOptions o = options_.remote_client;
    o.request_timeout = std::min(o.request_timeout, kProbeTimeout);
    std::string error;
    try {
      client::RestClient probe(cluster->client->config(), o);
      auto r = probe.get_raw("/version");
      if (!r) {
        error = r.error().to_string();
      } else if (r->status < 200 || r->status >= 300) {
        // Only a 2xx is an API server answering: a 404 is a wrong URL, a 503 a load balancer
        // without backends.
        error = "GET /version: HTTP " + std::to_string(r->status) +
                (r->status == 401 || r->status == 403 ? " (credentials rejected)" : "");
      }
    } catch (const std::exception& e) {
      error = e.what();
    }
    lock.lock();
    auto it = entries_.find(cluster->id);
    if (it == entries_.end()) continue;
    Entry& entry = *it->second;
    entry.probe_queued = false;
    if (!entry.active || entry.active->generation != cluster->generation) continue;
    entry.probed = cluster->generation;
    entry.probe_ok = error.empty();
    entry.probe_error = error;
    entry.next_probe = SteadyClock::now() + kProbeRetry;
    ++changes_;
    cv_.notify_all();
  }
}

}  // namespace kinformer::mesh
