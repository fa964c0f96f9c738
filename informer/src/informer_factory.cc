#include "kinformer/informer/informer_factory.h"

#include <exception>
#include <mutex>
#include <stdexcept>

#include "detail/delivering.h"

#include "kinformer/cache/label_selector.h"
#include "kinformer/client/error.h"

namespace kinformer::informer {
namespace {

std::string trim(const std::string& s) {
  auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  auto e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

// Lister-watchers through `client`, which they keep alive.
ListerWatcherFactory through(std::shared_ptr<client::RestClient> client) {
  if (!client) throw client::ConfigError("InformerFactory: the RestClient is null");
  return [client = std::move(client)](const client::ResourceType& type, const std::string& ns) {
    return client->lister_watcher(type, ns);
  };
}

}  // namespace

class InformerFactory::Impl {
 public:
  Impl(ListerWatcherFactory lister_watchers, FactoryOptions options);

  // The public methods of InformerFactory, which forwards to these.
  SharedInformer& informer(const client::ResourceType& type, const InformerOptions& options);
  void start();
  bool wait_for_cache_sync(std::chrono::milliseconds timeout);
  [[nodiscard]] bool has_synced() const;
  void on_informer_synced(std::function<void()> fn);
  [[nodiscard]] std::optional<SyncError> last_error() const;
  [[nodiscard]] std::vector<InformerSpec> informer_specs() const;
  [[nodiscard]] Freshness freshness() const;
  void shutdown();
  [[nodiscard]] std::size_t informer_count() const;
  [[nodiscard]] std::map<InformerKey, std::size_t> handler_counts() const;

  ListerWatcherFactory lister_watchers_;
  FactoryOptions options_;
  MetricsRegistryPtr registry_;
  std::shared_ptr<Metrics> metrics_;
  ReconnectBudgetPtr budget_;
  HandlerExecutorPtr executor_;
  client::Logger log_;

 private:
  // What on_informer_synced() registered; shared with the informers' on_synced callbacks.
  struct SyncListeners {
    std::mutex mu;
    std::vector<std::function<void()>> fns;  // guarded by mu
  };
  std::shared_ptr<SyncListeners> sync_listeners_ = std::make_shared<SyncListeners>();

  mutable std::mutex mu_;
  std::map<InformerKey, std::shared_ptr<SharedInformer>> informers_;  // guarded by mu_
  std::map<InformerKey, InformerSpec> specs_;                         // guarded by mu_
  bool started_ = false;                                              // guarded by mu_
  bool shut_down_ = false;                                            // guarded by mu_
};

InformerFactory::Impl::Impl(ListerWatcherFactory lister_watchers, FactoryOptions options)
    : lister_watchers_(std::move(lister_watchers)), options_(std::move(options)) {
  if (!lister_watchers_) {
    throw client::ConfigError("InformerFactory: the ListerWatcherFactory is empty");
  }
  if (!options_.clock) options_.clock = system_clock();
  if (!options_.random) options_.random = default_random();
  registry_ = options_.registry ? options_.registry : MetricsRegistry::in_memory();
  metrics_ = std::make_shared<Metrics>(registry_);
  budget_ = std::make_shared<ReconnectBudget>(options_.budget, options_.clock);
  log_ = client::Logger(options_.log, "informer", {}, options_.log_rate_limit);
  if (!options_.executor.log) {
    options_.executor.log = log_.sink();
    options_.executor.log_rate_limit = options_.log_rate_limit;
  }
  executor_ = options_.shared_executor ? options_.shared_executor
                                       : std::make_shared<HandlerExecutor>(options_.executor);
}

SharedInformer& InformerFactory::Impl::informer(const client::ResourceType& type,
                                                const InformerOptions& options) {
  InformerKey key;
  key.resource = type.gvr.to_string();
  key.namespace_ = options.namespace_;
  key.label_selector = cache::LabelSelector::parse(options.label_selector).to_string();
  key.field_selector = trim(options.field_selector);
  if (options.transform && (options.transform->name.empty() || !options.transform->fn)) {
    throw client::ConfigError("InformerFactory: informer " + key.to_string() +
                              ": a transform needs a non-empty name and a function");
  }
  std::optional<std::string> wanted;
  if (options.transform) wanted = options.transform->name;

  std::lock_guard lock(mu_);
  if (shut_down_) {
    throw client::ConfigError("InformerFactory: informer " + key.to_string() +
                              " requested after shutdown()");
  }
  if (auto it = informers_.find(key); it != informers_.end()) {
    // One key, one watch, one object model: typed handles cast the stored objects, so a typed
    // and a dynamic request for the same key cannot share an informer.
    if (it->second->type().codec != type.codec) {
      throw client::ConfigError("InformerFactory: informer " + key.to_string() +
                                " already exists with another object model (typed vs dynamic "
                                "codec); use the same ResourceType for one key");
    }
    auto existing = it->second->transform_name();
    if (existing != wanted) {
      throw client::ConfigError("InformerFactory: informer " + key.to_string() + ": transform '" +
                                wanted.value_or("<none>") + "' conflicts with transform '" +
                                existing.value_or("<none>") + "' of the existing informer");
    }
    return *it->second;
  }
  InformerConfig config;
  config.reflector.label_selector = key.label_selector;
  config.reflector.field_selector = key.field_selector;
  config.reflector.use_watch_list = options.use_watch_list.value_or(options_.use_watch_list);
  static_cast<ReflectorSettings&>(config.reflector) = options_.reflector;
  config.reflector.clock = options_.clock;
  config.reflector.random = options_.random;
  config.reflector.budget = budget_;
  config.transform = options.transform;
  config.resync = options.resync;
  config.handler_stop_timeout = options_.handler_stop_timeout;
  config.executor = executor_;
  config.runtime = options_.runtime;
  config.log = log_;
  config.on_synced = [listeners = sync_listeners_] {
    std::vector<std::function<void()>> fns;
    {
      std::lock_guard lock(listeners->mu);
      fns = listeners->fns;
    }
    for (const auto& fn : fns) fn();
  };
  config.metrics =
      std::make_shared<InformerMetrics>(metrics_, key.resource, key.namespace_,
                                        selector_hash(key.label_selector, key.field_selector));
  auto lw = lister_watchers_(type, key.namespace_);
  if (!lw) throw client::ConfigError("InformerFactory: no ListerWatcher for " + key.to_string());
  auto inf = std::make_shared<SharedInformer>(key, type, std::move(lw), std::move(config));
  // The reconnect budget grows with the informers it serves: after an API-server restart each
  // one needs its own rewatch and relist (ReconnectBudgetOptions).
  budget_->add_informer();
  informers_.emplace(key, inf);
  specs_.emplace(key, InformerSpec{type, options});
  if (started_) inf->start();
  return *inf;
}

void InformerFactory::Impl::on_informer_synced(std::function<void()> fn) {
  std::lock_guard lock(sync_listeners_->mu);
  sync_listeners_->fns.push_back(std::move(fn));
}

void InformerFactory::Impl::start() {
  std::lock_guard lock(mu_);
  if (started_ || shut_down_) return;
  started_ = true;
  for (auto& [key, inf] : informers_) inf->start();
}

bool InformerFactory::Impl::wait_for_cache_sync(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<std::shared_ptr<SharedInformer>> all;
  {
    std::lock_guard lock(mu_);
    for (auto& [key, inf] : informers_) all.push_back(inf);
  }
  for (auto& inf : all) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (!inf->wait_for_sync(std::max(left, std::chrono::milliseconds(0)))) return false;
  }
  return true;
}

bool InformerFactory::Impl::has_synced() const {
  std::lock_guard lock(mu_);
  for (const auto& [key, inf] : informers_) {
    if (!inf->has_synced()) return false;
  }
  return true;
}

std::optional<SyncError> InformerFactory::Impl::last_error() const {
  std::lock_guard lock(mu_);
  std::optional<SyncError> any;
  for (const auto& [key, inf] : informers_) {
    auto e = inf->last_error();
    if (!e) continue;
    if (!inf->has_synced()) return e;
    if (!any) any = std::move(e);
  }
  return any;
}

Freshness InformerFactory::Impl::freshness() const {
  std::lock_guard lock(mu_);
  std::optional<Freshness> out;
  for (const auto& [key, inf] : informers_) {
    Freshness f = inf->freshness();
    out = out ? stalest(*out, f) : std::move(f);
  }
  return out.value_or(Freshness{});
}

std::vector<InformerSpec> InformerFactory::Impl::informer_specs() const {
  std::lock_guard lock(mu_);
  std::vector<InformerSpec> out;
  out.reserve(specs_.size());
  for (const auto& [key, spec] : specs_) out.push_back(spec);
  return out;
}

void InformerFactory::Impl::shutdown() {
  std::map<InformerKey, std::shared_ptr<SharedInformer>> all;
  {
    std::lock_guard lock(mu_);
    // From one of its own reflectors (a transform, on_synced) it would wait for that reflector:
    // refused before anything is stopped, so the factory is not left half shut down.
    if (const SharedInformer* own = detail::delivering_informer()) {
      for (const auto& [key, inf] : informers_) {
        if (inf.get() == own) {
          throw std::logic_error("InformerFactory::shutdown() from the reflector of its informer " +
                                 key.to_string() + " would wait for itself");
        }
      }
    }
    shut_down_ = true;
    all = informers_;  // keep the entries: references handed out stay valid until destruction
  }
  // One informer after the other: each stop cancels its watch at once and joins its threads.
  // Also when another shutdown() is in progress: SharedInformer::stop() is idempotent and returns
  // only once that informer's threads are joined, so no caller returns early.
  for (auto& [key, inf] : all) inf->stop();
  if (!options_.shared_executor) executor_->shutdown(options_.handler_stop_timeout);
}

std::size_t InformerFactory::Impl::informer_count() const {
  std::lock_guard lock(mu_);
  return informers_.size();
}

std::map<InformerKey, std::size_t> InformerFactory::Impl::handler_counts() const {
  std::lock_guard lock(mu_);
  std::map<InformerKey, std::size_t> out;
  for (const auto& [key, inf] : informers_) out[key] = inf->handler_count();
  return out;
}

InformerFactory::InformerFactory(ListerWatcherFactory lister_watchers, FactoryOptions options)
    : impl_(std::make_unique<Impl>(std::move(lister_watchers), std::move(options))) {}

InformerFactory::InformerFactory(std::shared_ptr<client::RestClient> client, FactoryOptions options)
    : InformerFactory(through(std::move(client)), std::move(options)) {}

InformerFactory::~InformerFactory() {
  try {
    shutdown();
  } catch (const std::exception& e) {
    // Destroyed on one of its own reflectors (its last owner dropped in a transform or
    // on_synced): it cannot wait for that reflector to end, nor leave it running.
    impl_->log_.error("factory destroyed where it cannot shut down", {{"error", e.what()}});
    std::terminate();
  }
}

SharedInformer& InformerFactory::informer(const client::ResourceType& type,
                                          const InformerOptions& options) {
  return impl_->informer(type, options);
}
void InformerFactory::start() { impl_->start(); }
bool InformerFactory::wait_for_cache_sync(std::chrono::milliseconds timeout) {
  return impl_->wait_for_cache_sync(timeout);
}
bool InformerFactory::has_synced() const { return impl_->has_synced(); }
void InformerFactory::on_informer_synced(std::function<void()> fn) {
  impl_->on_informer_synced(std::move(fn));
}
std::optional<SyncError> InformerFactory::last_error() const { return impl_->last_error(); }
std::vector<InformerSpec> InformerFactory::informer_specs() const {
  return impl_->informer_specs();
}
Freshness InformerFactory::freshness() const { return impl_->freshness(); }
void InformerFactory::shutdown() { impl_->shutdown(); }
std::size_t InformerFactory::informer_count() const { return impl_->informer_count(); }
std::map<InformerKey, std::size_t> InformerFactory::handler_counts() const {
  return impl_->handler_counts();
}
ReconnectBudget& InformerFactory::reconnect_budget() noexcept { return *impl_->budget_; }
HandlerExecutor& InformerFactory::executor() noexcept { return *impl_->executor_; }
HandlerExecutorPtr InformerFactory::executor_ptr() const noexcept { return impl_->executor_; }
MetricsRegistry& InformerFactory::registry() noexcept { return *impl_->registry_; }
MetricsRegistryPtr InformerFactory::registry_ptr() const noexcept { return impl_->registry_; }

}  // namespace kinformer::informer
