#include "kinformer/mesh/cluster_registry.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>

#include "cluster_store.h"
#include "kinformer/cache/label_selector.h"
#include "kinformer/client/secret.h"
#include "kinformer/informer/once_guard.h"
#include "kinformer/informer/registration.h"
#include "remote_cluster_life.h"
#include "secret_source.h"

namespace kinformer::mesh {

using detail::ClusterEvent;
using detail::SteadyClock;

namespace {

// The probe's GET /version for a remote client that runs no informer yet.
constexpr std::chrono::milliseconds kProbeTimeout{5000};
// The state gauge is refreshed at least this often (states also change without a signal: an
// informer's error).
constexpr std::chrono::milliseconds kGaugeRefresh{5000};

constexpr ClusterState kStates[] = {ClusterState::syncing, ClusterState::synced,
                                    ClusterState::timed_out, ClusterState::refused,
                                    ClusterState::unreachable};

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

class ClusterRegistry::Impl {
 public:
  Impl(std::shared_ptr<client::RestClient> local_client,
       std::shared_ptr<informer::InformerFactory> local_factory, ClusterRegistryOptions options);
  void start_threads();

  client::Status start_once();
  void on_secret(const client::ObjectPtr& object, bool deleted);
  ClusterSubscription subscribe(ClusterHandler handler);
  [[nodiscard]] RemoteClusterPtr cluster(std::string_view id) const;
  [[nodiscard]] std::vector<ClusterStatus> clusters() const;
  [[nodiscard]] bool has_synced() const;
  bool wait_for_sync(std::chrono::milliseconds timeout) const;
  void shutdown();
  void poke();  // a change for the worker (and wait_for_sync()) to look at
  ~Impl();
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  const std::shared_ptr<client::RestClient> local_client_;
  const std::shared_ptr<informer::InformerFactory> local_factory_;
  ClusterRegistryOptions options_;
  informer::OnceGuard once_;

 private:
  void run();  // the worker
  void reconcile(std::unique_lock<std::mutex>& lock, std::vector<ClusterEvent>& events,
                 std::vector<RemoteClusterPtr>& retire);
  void run_blocking();  // probes and retirements
  void probe(const RemoteClusterPtr& cluster);
  [[nodiscard]] bool synced_locked() const;  // mu_ held

  const client::Logger log_;
  std::unique_ptr<detail::RegistryMetrics> metrics_;
  detail::RemoteSettings settings_;
  informer::HandlerExecutorPtr remote_executor_;  // the remote factories' pool, if the registry's
  detail::ClusterStore store_;
  informer::SharedInformer* secrets_ = nullptr;  // set by start_once; owned by local_factory_
  informer::Registration secret_handler_;        // set once by start_once, before the signal

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;  // the worker, and wait_for_sync()
  std::condition_variable jobs_cv_;     // the blocking thread
  detail::SecretSource source_;         // guarded by mu_
  std::map<std::string, std::unique_ptr<detail::RemoteClusterLife>, std::less<>> lives_;  // mu_
  std::uint64_t changes_ = 0;                  // guarded by mu_: bumped by each signal
  bool stopping_ = false;                      // guarded by mu_
  bool secrets_registered_ = false;            // guarded by mu_: secret_handler_ is assigned
  bool reconciled_after_sync_ = false;         // guarded by mu_
  bool jobs_closing_ = false;                  // guarded by mu_: the worker is joined
  bool shut_down_ = false;                     // guarded by mu_
  std::deque<RemoteClusterPtr> first_probes_;  // guarded by mu_: clients to GET /version
  std::deque<RemoteClusterPtr> retry_probes_;  // guarded by mu_: ... after a failed one
  std::deque<RemoteClusterPtr> retiring_;      // guarded by mu_: factories to shut down
  std::thread::id worker_id_;                  // set once before the worker takes work
  struct Doorbell {
    std::mutex mu;         // taken before mu_, never while holding it
    Impl* impl = nullptr;  // guarded by mu; null once shutdown() began
  };
  const std::shared_ptr<Doorbell> doorbell_ = std::make_shared<Doorbell>();
  std::mutex shutdown_mu_;
  std::thread worker_;
  std::thread blocking_;
};

ClusterRegistry::Impl::Impl(std::shared_ptr<client::RestClient> local_client,
                            std::shared_ptr<informer::InformerFactory> local_factory,
                            ClusterRegistryOptions options)
    : local_client_(std::move(local_client)),
      local_factory_(std::move(local_factory)),
      options_(std::move(options)),
      log_(options_.log, "cluster-registry", {{"namespace", options_.secret_namespace}}),
      store_(log_),
      source_(options_.local_cluster_id, log_) {
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
  metrics_ = std::make_unique<detail::RegistryMetrics>(*options_.registry);
  for (ClusterState s : kStates) metrics_->clusters.add({{"state", std::string(to_string(s))}});
  settings_.policy = options_.kubeconfig_policy;
  settings_.client = options_.remote_client;
  // Every remote client runs its I/O on one runtime (threads grow with cores, not clusters).
  if (!settings_.client.runtime) settings_.client.runtime = std::make_shared<client::IoRuntime>();
  settings_.factory = options_.remote_factory;
  // Every remote factory runs its handlers on one pool (the registry's, unless the caller gave
  // one): threads do not grow with clusters. Shut down after the last remote factory.
  if (!settings_.factory.shared_executor) {
    informer::HandlerExecutorOptions pool = options_.remote_factory.executor;
    if (!pool.log) {
      pool.log = options_.remote_factory.log;
      pool.log_rate_limit = options_.remote_factory.log_rate_limit;
    }
    remote_executor_ = std::make_shared<informer::HandlerExecutor>(pool);
    settings_.factory.shared_executor = remote_executor_;
  }
  settings_.sync_timeout = options_.sync_timeout;
}

ClusterRegistry::Impl::~Impl() {
  // Also when shutdown() never ran (a constructor that threw): signals must not reach freed state.
  std::lock_guard lock(doorbell_->mu);
  doorbell_->impl = nullptr;
}

void ClusterRegistry::Impl::start_threads() {
  // The factories' sync signals reach the registry through the doorbell, which never owns it: a
  // factory may outlive the registry, and the registry must never be destroyed on a reflector
  // (that would stop the informer from its own reflector).
  doorbell_->impl = this;
  settings_.on_synced = [doorbell = doorbell_] {
    std::lock_guard lock(doorbell->mu);
    if (doorbell->impl != nullptr) doorbell->impl->poke();
  };
  local_factory_->on_informer_synced(settings_.on_synced);  // has_synced() reads it
  worker_ = std::thread([this] { run(); });
  worker_id_ = worker_.get_id();  // read by shutdown(), which happens after construction
  blocking_ = std::thread([this] { run_blocking(); });
}

void ClusterRegistry::Impl::poke() {
  std::lock_guard lock(mu_);
  ++changes_;
  cv_.notify_all();
}

client::Status ClusterRegistry::Impl::start_once() {
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
    informer::Registration registration =
        secrets_->add_handler(handler, {.name = "cluster-registry"});
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
  const auto deadline = SteadyClock::now() + options_.start_timeout;
  if (!secrets_->wait_for_sync(options_.start_timeout) ||
      !secret_handler_.wait_for_sync(std::max(
          std::chrono::milliseconds(0),
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now())))) {
    std::string why = "ClusterRegistry: the Secrets of namespace " + options_.secret_namespace +
                      " did not sync within " + std::to_string(options_.start_timeout.count()) +
                      " ms";
    if (auto e = secrets_->last_error()) why += ": " + e->to_string();
    return client::Error{.code = client::Errc::timeout, .message = why};
  }
  poke();  // has_synced() waits for the worker to have looked at the initial list
  return client::Ok{};
}

void ClusterRegistry::Impl::on_secret(const client::ObjectPtr& object, bool deleted) {
  const auto& secret = static_cast<const client::Secret&>(*object);
  std::lock_guard lock(mu_);
  source_.on_secret(secret, deleted);
  ++changes_;
  cv_.notify_all();
}

ClusterSubscription ClusterRegistry::Impl::subscribe(ClusterHandler handler) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return ClusterSubscription();
  }
  ClusterSubscription s = store_.subscribe(std::move(handler));
  poke();  // the worker tells it what exists
  return s;
}

void ClusterRegistry::Impl::run() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    const std::uint64_t seen = changes_;
    lock.unlock();
    store_.replay();  // new subscribers first learn what exists
    lock.lock();
    if (stopping_) break;
    std::vector<ClusterEvent> events;
    std::vector<RemoteClusterPtr> retire;
    reconcile(lock, events, retire);
    lock.unlock();
    // In order, outside the lock (a handler may call the registry); a replaced or removed
    // client is shut down only after every subscriber heard of it.
    for (const ClusterEvent& e : events) {
      if (e.kind != ClusterEvent::Kind::synced) {
        metrics_->changes.add({{"kind", detail::to_string(e.kind)}}).increment();
      }
      store_.publish(e);
    }
    lock.lock();
    for (auto& c : retire) retiring_.push_back(std::move(c));
    jobs_cv_.notify_all();
    std::map<ClusterState, double> by_state;
    for (const auto& [id, life] : lives_) by_state[life->status().state] += 1;
    for (ClusterState s : kStates) {
      metrics_->clusters.add({{"state", std::string(to_string(s))}}).set(by_state[s]);
    }
    cv_.notify_all();  // wait_for_sync()
    auto deadline = SteadyClock::now() + kGaugeRefresh;
    for (const auto& [id, life] : lives_) deadline = std::min(deadline, life->next_deadline());
    cv_.wait_until(lock, deadline, [&] { return stopping_ || changes_ != seen; });
  }
}

void ClusterRegistry::Impl::reconcile(std::unique_lock<std::mutex>& lock,
                                      std::vector<ClusterEvent>& events,
                                      std::vector<RemoteClusterPtr>& retire) {
  // Read before the Secrets: once the handler has synced, every initial Secret is in source_.
  const bool initial_list_seen = secrets_registered_ && secret_handler_.has_synced();
  const std::map<std::string, detail::WantedCluster> wanted = source_.wanted();

  for (auto it = lives_.begin(); it != lives_.end();) {
    if (wanted.contains(it->first)) {
      ++it;
      continue;
    }
    log_.info("remote cluster removed", {{"cluster", it->first}});
    // Its series go with it: cluster IDs come and go, the families must not grow with them.
    metrics_->sync_timeouts.remove(&metrics_->sync_timeouts.add({{"cluster", it->first}}));
    if (RemoteClusterPtr before = it->second->active()) {
      events.push_back({.kind = ClusterEvent::Kind::removed, .before = std::move(before)});
    }
    for (auto& c : it->second->release()) retire.push_back(std::move(c));
    it = lives_.erase(it);
  }

  for (const auto& [id, want] : wanted) {
    auto it = lives_.find(id);
    if (it == lives_.end()) {
      it = lives_
               .emplace(id, std::make_unique<detail::RemoteClusterLife>(id, options_.sync_timeout,
                                                                        log_, *metrics_))
               .first;
    }
    detail::RemoteClusterLife& life = *it->second;  // only this thread erases lives_
    life.set_secret(want.secret);
    if (life.kubeconfig() == want.kubeconfig) continue;
    const std::uint64_t generation = life.next_generation();
    lock.unlock();
    detail::Built built = detail::build_remote(id, want, generation, settings_);
    lock.lock();
    if (stopping_) {
      if (built.cluster) retire.push_back(std::move(built.cluster));
      return;
    }
    if (auto e = life.apply(want, std::move(built), retire)) events.push_back(std::move(*e));
  }

  const auto now = SteadyClock::now();
  for (auto& [id, life] : lives_) {
    for (auto& e : life->settle(now, retire)) events.push_back(std::move(e));
    if (auto due = life->probe_due(now)) {
      // A cluster's first probe goes before every retry of a failing one: K blackholed remotes
      // delay a new cluster's first answer by at most the one probe in flight.
      (due->retry ? retry_probes_ : first_probes_).push_back(std::move(due->cluster));
      jobs_cv_.notify_all();
    }
  }
  if (initial_list_seen) reconciled_after_sync_ = true;
}

void ClusterRegistry::Impl::run_blocking() {
  std::unique_lock lock(mu_);
  for (;;) {
    jobs_cv_.wait(lock, [&] {
      return jobs_closing_ || !retiring_.empty() ||
             (!stopping_ && (!first_probes_.empty() || !retry_probes_.empty()));
    });
    if (!retiring_.empty()) {
      RemoteClusterPtr cluster = std::move(retiring_.front());
      retiring_.pop_front();
      lock.unlock();
      cluster->factory->shutdown();
      lock.lock();
      continue;
    }
    if (jobs_closing_) return;  // the worker is joined: nothing more is retired
    auto& queue = first_probes_.empty() ? retry_probes_ : first_probes_;
    RemoteClusterPtr cluster = std::move(queue.front());
    queue.pop_front();
    lock.unlock();
    probe(cluster);
    lock.lock();
  }
}

void ClusterRegistry::Impl::probe(const RemoteClusterPtr& cluster) {
  // Its own client with a short deadline: a blackholed server delays the next probe (and
  // shutdown) by at most kProbeTimeout, never the clusters' informers.
  client::RestClientOptions o = settings_.client;  // on the remote clients' shared runtime
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
  std::lock_guard lock(mu_);
  if (auto it = lives_.find(cluster->id); it != lives_.end()) {
    it->second->probe_done(cluster->generation, std::move(error), SteadyClock::now());
  }
  ++changes_;
  cv_.notify_all();
}

RemoteClusterPtr ClusterRegistry::Impl::cluster(std::string_view id) const {
  std::lock_guard lock(mu_);
  auto it = lives_.find(id);
  return it == lives_.end() ? nullptr : it->second->active();
}

std::vector<ClusterStatus> ClusterRegistry::Impl::clusters() const {
  std::vector<ClusterStatus> out;
  ClusterStatus local;
  local.id = options_.local_cluster_id;
  local.local = true;
  local.informers = local_factory_->informer_count();
  local.freshness = local_factory_->freshness();
  auto error = local_factory_->last_error();
  local.state = error                          ? ClusterState::unreachable
                : local_factory_->has_synced() ? ClusterState::synced
                                               : ClusterState::syncing;
  if (error) local.reason = error->to_string();
  out.push_back(std::move(local));
  std::lock_guard lock(mu_);
  for (const auto& [id, life] : lives_) out.push_back(life->status());
  return out;
}

bool ClusterRegistry::Impl::synced_locked() const {
  if (!once_.done() || !secret_handler_.has_synced() || !local_factory_->has_synced()) return false;
  // The worker has looked at the Secrets since the handler saw the initial list.
  if (!reconciled_after_sync_) return false;
  return std::all_of(lives_.begin(), lives_.end(),
                     [](const auto& entry) { return entry.second->settled(); });
}

bool ClusterRegistry::Impl::has_synced() const {
  std::lock_guard lock(mu_);
  return synced_locked();
}

bool ClusterRegistry::Impl::wait_for_sync(std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return synced_locked(); });
}

void ClusterRegistry::Impl::shutdown() {
  if (std::this_thread::get_id() == worker_id_) {
    throw std::logic_error(
        "ClusterRegistry::shutdown() called from a ClusterHandler (the registry's own thread)");
  }
  std::lock_guard serial(shutdown_mu_);  // a second caller waits for the first, then returns
  {
    std::lock_guard lock(doorbell_->mu);  // signals still to come find no registry
    doorbell_->impl = nullptr;
  }
  {
    std::lock_guard lock(mu_);
    if (shut_down_) return;
    stopping_ = true;
    cv_.notify_all();
    jobs_cv_.notify_all();
  }
  if (worker_.joinable()) worker_.join();
  secret_handler_.close();
  store_.clear();
  std::vector<RemoteClusterPtr> left;
  {
    std::lock_guard lock(mu_);
    for (auto& [id, life] : lives_) {
      for (auto& c : life->release()) left.push_back(std::move(c));
    }
    lives_.clear();
    first_probes_.clear();
    retry_probes_.clear();
    jobs_closing_ = true;  // whatever the worker retired is in retiring_
    jobs_cv_.notify_all();
  }
  if (blocking_.joinable()) blocking_.join();  // drains retiring_ first
  for (auto& c : left) c->factory->shutdown();
  if (remote_executor_) remote_executor_->shutdown(options_.remote_factory.handler_stop_timeout);
  std::lock_guard lock(mu_);
  shut_down_ = true;
}

// ---- ClusterRegistry ----

ClusterRegistry::ClusterRegistry(std::shared_ptr<client::RestClient> local_client,
                                 std::shared_ptr<informer::InformerFactory> local_factory,
                                 ClusterRegistryOptions options)
    : impl_(std::make_shared<Impl>(std::move(local_client), std::move(local_factory),
                                   std::move(options))) {
  impl_->start_threads();
}

// NOLINTNEXTLINE(bugprone-exception-escape): bad_alloc, or shutdown() on its own worker: terminate
ClusterRegistry::~ClusterRegistry() { shutdown(); }

client::Status ClusterRegistry::start() {
  client::Status s = impl_->once_.run([this] { return impl_->start_once(); });
  // has_synced() needs the guard done, which it is only now: wake wait_for_sync().
  if (s) impl_->poke();
  return s;
}
bool ClusterRegistry::started() const { return impl_->once_.done(); }
ClusterSubscription ClusterRegistry::subscribe(ClusterHandler handler) {
  return impl_->subscribe(std::move(handler));
}
std::shared_ptr<informer::InformerFactory> ClusterRegistry::factory(std::string_view id) const {
  if (id == impl_->options_.local_cluster_id) return impl_->local_factory_;
  auto c = impl_->cluster(id);
  return c ? c->factory : nullptr;
}
RemoteClusterPtr ClusterRegistry::cluster(std::string_view id) const { return impl_->cluster(id); }
std::vector<ClusterStatus> ClusterRegistry::clusters() const { return impl_->clusters(); }
bool ClusterRegistry::has_synced() const { return impl_->has_synced(); }
bool ClusterRegistry::wait_for_sync(std::chrono::milliseconds timeout) const {
  return impl_->wait_for_sync(timeout);
}
const std::string& ClusterRegistry::local_cluster_id() const noexcept {
  return impl_->options_.local_cluster_id;
}
void ClusterRegistry::shutdown() { impl_->shutdown(); }

}  // namespace kinformer::mesh
