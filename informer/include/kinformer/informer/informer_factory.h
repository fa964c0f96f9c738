#pragma once
// InformerFactory: the single owner of every informer of one cluster.

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kinformer/cache/transform.h"
#include "kinformer/client/io_runtime.h"
#include "kinformer/client/resource.h"
#include "kinformer/client/rest_client.h"
#include "kinformer/client/watch.h"
#include "kinformer/informer/backoff.h"
#include "kinformer/informer/clock.h"
#include "kinformer/informer/handler_executor.h"
#include "kinformer/informer/metrics.h"
#include "kinformer/informer/metrics_registry.h"
#include "kinformer/informer/reconnect_budget.h"
#include "kinformer/informer/shared_informer.h"
#include "kinformer/informer/typed_informer.h"

namespace kinformer::informer {

/// Makes the ListerWatcher of one informer: production passes the RestClient's lister_watcher,
/// tests a fake. `ns` empty: all namespaces (or a cluster-scoped resource).
using ListerWatcherFactory = std::function<client::ListerWatcherPtr(
    const client::ResourceType& type, const std::string& ns)>;

/// What a component asks for. namespace/selectors form the informer key; transform, resync and
/// use_watch_list configure the informer created for a new key.
struct InformerOptions {
  std::string namespace_;
  std::string label_selector;  ///< parsed (client::ConfigError if invalid) and canonicalised
  std::string field_selector;
  /// Must match (by name) the transform of an existing informer with the same key.
  std::optional<cache::Transform> transform;
  std::chrono::milliseconds resync{0};
  /// Streaming list (WatchList) instead of LIST; unset: FactoryOptions::use_watch_list. A
  /// refusal falls back to LIST for that sync only; the next relist tries WatchList again (see
  /// Reflector).
  std::optional<bool> use_watch_list;
};

struct FactoryOptions {
  /// Informers sync through a streaming list (WatchList) unless InformerOptions says otherwise,
  /// as client-go v0.36 does by default. A server that refuses it costs one request per sync
  /// (the LIST fallback). LIST relists queue behind the client's request rate limit after an
  /// API-server restart, WatchList syncs do not (docs/BENCHMARKS.md, "Reconnect storm").
  bool use_watch_list = true;
  /// Every informer's list and watch settings (ReflectorSettings, with their defaults): the
  /// WatchList initial-events timeout and deadline, min_watch_duration, watch_idle_timeout,
  /// page_size, and the backoff (make_backoff: one per reflector, as Envoy injects its backoff
  /// strategy; null: a JitteredExponentialBackoff with `backoff`, `clock` and `random`).
  ReflectorSettings reflector;
  /// The factory's reconnect budget; every informer it creates adds its per-informer share.
  ReconnectBudgetOptions budget;
  /// Null: system_clock().
  ClockPtr clock;
  /// Null: default_random().
  RandomSource random;
  /// Metrics go here (a prom::PrometheusRegistry to export them to Prometheus;
  /// MetricsRegistry::null() for none). Null: a private in-memory one (see registry()).
  MetricsRegistryPtr registry;
  /// Per informer, how long shutdown waits (for all its handlers together) for running
  /// callbacks to return; a handler still running then is given up on and logged.
  std::chrono::milliseconds handler_stop_timeout{5000};
  /// The pool every handler of this factory runs on (size, blocking threshold, cap on
  /// replacement workers): see HandlerExecutorOptions. Unused with shared_executor.
  HandlerExecutorOptions executor;
  /// Run the handlers on this pool instead of one of the factory's own: several factories (e.g.
  /// ClusterRegistry's remote clusters) then share one set of threads. Each handler is a strand
  /// of its own and strands take turns, a bounded batch each (fairness is per handler, not per
  /// factory), so a flood on one factory delays another's handlers by at most one batch per busy
  /// strand. A stuck handler is compensated by an extra worker, out of the pool's cap, which the
  /// factories now share (a handler given up on at shutdown keeps its worker until it returns).
  /// shutdown() stops this factory's handlers but not the pool; it must outlive the factory's
  /// shutdown. Null: the factory's own pool.
  HandlerExecutorPtr shared_executor;
  /// Where the informers' reflectors run (their list/watch loops, store updates, transforms and
  /// on_informer_synced callbacks; see Reflector): a runtime's threads, which a watching
  /// reflector does not hold. Null: the process's shared one (as many threads as
  /// IoRuntime::default_threads(), started with the first informer). Better not a client's
  /// runtime: store updates would then delay its network I/O, and a transform could not call it.
  client::IoRuntimePtr runtime;
  /// Every log line of this factory's informers, reflectors, handlers and pool goes here (one
  /// record: level, component, message, key/value fields; see client/log.h). Null: logfmt lines
  /// on stderr. Records are rate-limited per informer and cause by log_rate_limit.
  client::LogSink log;
  client::LogRateLimit log_rate_limit;
};

/// What an informer was created with: enough to create the same informer on another factory
/// (ClusterRegistry's make-before-break).
struct InformerSpec {
  client::ResourceType type;
  InformerOptions options;
};

/// Owns every informer, reflector, thread and watch it creates: one factory per cluster per
/// process. Informers are deduplicated by InformerKey, so the API server sees one watch per key
/// whatever the number of components and handlers. Informers run until shutdown() — never
/// stopped because a handler left.
///
/// Thread-safety: thread-safe; all methods may be called concurrently (informer() also from
/// inside handlers). Lifetime: references returned by informer() are valid until the factory is
/// destroyed; Registrations may outlive it.
class InformerFactory {
 public:
  /// Lists and watches through `client` (held until the factory is destroyed). Throws
  /// client::ConfigError if `client` is null.
  explicit InformerFactory(std::shared_ptr<client::RestClient> client, FactoryOptions options = {});
  /// Lists and watches through what `lister_watchers` makes (tests, custom sources). Throws
  /// client::ConfigError if it is empty.
  explicit InformerFactory(ListerWatcherFactory lister_watchers, FactoryOptions options = {});
  /// Calls shutdown().
  ~InformerFactory();
  InformerFactory(const InformerFactory&) = delete;
  InformerFactory& operator=(const InformerFactory&) = delete;

  /// The informer for (type, options' key); created on first use (and started if the factory
  /// is started). Throws client::ConfigError for an invalid label selector, a transform without
  /// a name or function, a transform conflicting with the existing informer's, or after
  /// shutdown().
  SharedInformer& informer(const client::ResourceType& type, const InformerOptions& options = {});
  /// Typed handle for a model with client::ResourceTraits<T>::type().
  template <typename T>
  TypedInformer<T> informer(const InformerOptions& options = {}) {
    return TypedInformer<T>(informer(client::ResourceTraits<T>::type(), options));
  }

  /// Starts every informer; informers created later start immediately. Idempotent.
  void start();
  /// Waits (real time) until every informer created so far has synced; false on timeout.
  bool wait_for_cache_sync(std::chrono::milliseconds timeout);
  /// Every informer created so far has synced (true when there is none).
  [[nodiscard]] bool has_synced() const;
  /// Calls `fn` each time one of the factory's informers (also one created later) completes its
  /// initial sync (the list is in the store and was handed to the handlers): a signal to look at
  /// has_synced() again, instead of polling it. `fn` runs where that informer's reflector runs (a
  /// runtime thread, or a blocking-pool thread after a LIST), outside the factory's and the
  /// informer's locks, and must not block (an exception is caught and logged); it stays registered
  /// for the factory's life (capture weakly what may go first).
  void on_informer_synced(std::function<void()> fn);
  /// The latest failure of an informer that has not synced, else of any informer; nullopt when
  /// none has one.
  [[nodiscard]] std::optional<SyncError> last_error() const;
  /// How each informer was created, by key.
  [[nodiscard]] std::vector<InformerSpec> informer_specs() const;
  /// The stalest view among the informers (stalest()); resyncing with no contact when there is
  /// none.
  [[nodiscard]] Freshness freshness() const;
  /// Stops every informer: cancels every watch, waits for every reflector loop to end, stops every
  /// handler, then the handler pool. Bounded by the longest in-flight LIST (the client's request
  /// deadline) plus handler_stop_timeout per informer with a stuck handler, plus
  /// handler_stop_timeout for the pool. Idempotent. From one of its own reflectors (a transform,
  /// an on_informer_synced callback) it would wait for itself: it throws std::logic_error and
  /// stops nothing (uncaught in a transform, that ends the process).
  void shutdown();

  [[nodiscard]] std::size_t informer_count() const;
  /// Handlers per informer key.
  [[nodiscard]] std::map<InformerKey, std::size_t> handler_counts() const;
  [[nodiscard]] ReconnectBudget& reconnect_budget() noexcept;
  /// The pool every handler runs on (thread counts for audits and tests).
  [[nodiscard]] HandlerExecutor& executor() noexcept;
  /// The pool, shared (e.g. for EndpointSubscriptions, whose subscribers run on it).
  [[nodiscard]] HandlerExecutorPtr executor_ptr() const noexcept;
  /// Where the informers' metrics go (FactoryOptions::registry, or the private one).
  [[nodiscard]] MetricsRegistry& registry() noexcept;
  /// The registry, shared (e.g. for EndpointSubscriptions' series).
  [[nodiscard]] MetricsRegistryPtr registry_ptr() const noexcept;

 private:
  class Impl;  // every informer, the locks, the pool and the metrics (informer_factory.cc)
  const std::unique_ptr<Impl> impl_;
};

}  // namespace kinformer::informer
