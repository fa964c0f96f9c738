#pragma once
// SharedInformer: one store kept true by one reflector, fanned out to many handlers.

#include <chrono>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "kinformer/cache/store.h"
#include "kinformer/cache/transform.h"
#include "kinformer/client/io_runtime.h"
#include "kinformer/client/resource.h"
#include "kinformer/client/watch.h"
#include "kinformer/informer/event_handler.h"
#include "kinformer/informer/handler_executor.h"
#include "kinformer/informer/metrics.h"
#include "kinformer/informer/reflector.h"
#include "kinformer/informer/registration.h"
#include "kinformer/informer/sync_error.h"

namespace kinformer::informer {

namespace detail {
class Listener;
}  // namespace detail

/// What makes two informers the same: everything that changes what the API server sends (the
/// cluster is implied by the factory). Label selectors are canonicalised.
struct InformerKey {
  std::string resource;  ///< GroupVersionResource::to_string()
  std::string namespace_;
  std::string label_selector;
  std::string field_selector;
  // NOLINTNEXTLINE(modernize-use-nullptr): clang-tidy 14 takes the synthesized `< 0` for a pointer
  auto operator<=>(const InformerKey&) const = default;
  [[nodiscard]] std::string to_string() const;
};

/// Everything an informer needs besides its lister-watcher; built by InformerFactory.
struct InformerConfig {
  ReflectorOptions reflector;
  std::optional<cache::Transform> transform;
  /// 0: no resync. Otherwise every handler gets on_update(o, o) for every cached object at
  /// this period.
  std::chrono::milliseconds resync{0};
  /// How long stop() waits, for all handlers together, for running callbacks to return.
  std::chrono::milliseconds handler_stop_timeout{5000};
  std::shared_ptr<InformerMetrics> metrics;  ///< required
  /// The pool that runs the handlers (the factory's). Null: the informer makes its own.
  HandlerExecutorPtr executor;
  /// Where the reflector's loop runs (Reflector::start). Null: the process's shared runtime
  /// (client::IoRuntime::default_threads() threads, started with the first informer, kept until
  /// the process exits).
  client::IoRuntimePtr runtime;
  /// The factory's logger; the informer names itself (informer="...") on its lines.
  client::Logger log;
  /// Called once, where the reflector runs (a runtime thread, or a blocking-pool thread after a
  /// LIST) and outside the informer's locks, when
  /// the initial list is in the store and was handed to the handlers (has_synced() is true). Must
  /// not block; an exception is caught and logged.
  std::function<void()> on_synced;
};

/// A type-erased informer (objects are client::ObjectPtr). Owned by InformerFactory; users get a
/// reference that stays valid until the factory is destroyed.
///
/// Data flow: the reflector (one thread at a time) updates the store first, then records each
/// change once (its key computed once) and hands the batch to every handler's bounded, coalescing
/// queue, outside the distribution lock; each handler is a serial strand on the factory's
/// HandlerExecutor (a bounded pool: threads are O(pool), not O(handlers)), woken once per batch (a
/// list's chunk, a part of a batch of watch events: kMaxHandOff). Handlers never delay the
/// reflector or each other (the pool compensates for a blocked worker).
///
/// Thread-safety: thread-safe; every public method may be called from any thread, including from
/// inside a handler callback.
///
/// Its state (locks, listeners, the reflector and its loops) lives in SharedInformer::Impl
/// (informer/src/shared_informer_impl.h), which is the reflector's sink.
class SharedInformer : public std::enable_shared_from_this<SharedInformer> {
 public:
  /// Most notifications (watch events x handlers) one hand-off of buffered watch events queues
  /// before the handlers are woken: a batch of events from the stream is applied in parts of
  /// max(1, kMaxHandOff / handlers) events (one event, however many handlers, beyond
  /// kMaxHandOff of them), which bounds what batching adds to the first event's latency.
  static constexpr std::size_t kMaxHandOff = 4096;

  SharedInformer(InformerKey key, client::ResourceType type,
                 client::ListerWatcherPtr lister_watcher, InformerConfig config);
  // NOLINTNEXTLINE(bugprone-exception-escape): see stop(); from its own reflector: terminate
  ~SharedInformer();
  SharedInformer(const SharedInformer&) = delete;
  SharedInformer& operator=(const SharedInformer&) = delete;

  /// Registers a handler. It first receives on_add(o, true) for every object now in the store,
  /// then every later change. Each handler runs serially on the pool (calls to one handler
  /// never overlap; different handlers run concurrently); its pending
  /// notifications are coalesced per object key, so its queue never holds more than two entries
  /// per key (memory bounded by the cache size, not by the event rate):
  ///   add + update -> add (latest state, initial flag kept)
  ///   add + delete -> nothing (the handler never saw the object)
  ///   update(a,b) + update(b,c) -> update(a,c)
  ///   update(a,b) + delete -> delete
  ///   delete + add -> delete, then add (kept apart: the object was recreated)
  /// Order is preserved per key; across keys, entries are delivered in the order their key first
  /// became pending. Safe to call before or after start(), and from inside a handler.
  /// The rules live in informer/src/detail/coalesce.h (one table-driven test per row).
  Registration add_handler(ResourceEventHandlerPtr handler, HandlerOptions options = {});

  [[nodiscard]] const cache::Store& store() const noexcept;
  [[nodiscard]] std::shared_ptr<const cache::Store> store_ptr() const noexcept;
  /// Adds a custom index to the store (existing contents are indexed). See Store::add_index.
  void add_index(std::string name, cache::Store::IndexFunc fn);

  /// True once the initial list (or WatchList initial events) is in the store (handlers may still
  /// be working through it: see Registration::has_synced()). Never waits for the fan-out.
  [[nodiscard]] bool has_synced() const;
  /// Waits (real time) until has_synced() or the timeout; returns has_synced().
  bool wait_for_sync(std::chrono::milliseconds timeout) const;
  /// Number of open registrations (the reference count).
  [[nodiscard]] std::size_t handler_count() const;
  [[nodiscard]] const InformerKey& key() const noexcept;
  [[nodiscard]] const client::ResourceType& type() const noexcept;
  [[nodiscard]] std::string last_sync_resource_version() const;
  [[nodiscard]] std::optional<std::string> transform_name() const;
  /// See Reflector::watch_list_fell_back(): the latest WatchList sync attempt fell back to LIST.
  [[nodiscard]] bool watch_list_fell_back() const;
  /// How fresh the cache is: fresh, stale (nothing from the server for longer than the watch's
  /// idle deadline) or resyncing; when the server was last heard from; the last resourceVersion.
  /// A watch opening counts as contact here; the metric kinformer_last_sync_timestamp_seconds
  /// moves only on a list, an event or a bookmark (so on a server without bookmarks it ages
  /// while a quiet watch is healthy).
  [[nodiscard]] Freshness freshness() const;
  /// Whether the cache has seen resourceVersion `rv` (an event or bookmark at or past it), as
  /// Kubernetes 1.35 made resourceVersions comparable integers: true or false; nullopt when
  /// either version is not a plain decimal integer (an older server, an aggregated API), or
  /// before the first sync. (After an etcd restore the cache may hold a version newer than the
  /// server's until its relist lands: a yes then is about the old history.)
  [[nodiscard]] std::optional<bool> has_observed(std::string_view rv) const;
  /// Waits (real time) until has_observed(rv) is true (a controller that wrote an object waits
  /// for its cache to see the write), or the timeout. Returns has_observed(rv) at the end:
  /// nullopt at once for a version that cannot be compared.
  std::optional<bool> wait_for_resource_version(std::string_view rv,
                                                std::chrono::milliseconds timeout) const;
  /// Why the informer cannot list or watch right now: the latest failed LIST page or watch
  /// opening of its reflector, while no later request succeeded (e.g. verb "list", reason
  /// "forbidden", the server's message naming the user, verb, resource and namespace). nullopt
  /// once a request succeeds, and before any failed. The reflector keeps retrying with backoff
  /// meanwhile; failures are also counted in kinformer_request_errors_total{verb,reason}.
  [[nodiscard]] std::optional<SyncError> last_error() const;
  [[nodiscard]] InformerMetrics& metrics() const noexcept;

  /// Starts the reflector's loop (and the resync loop) on the runtime. Idempotent. Called by
  /// InformerFactory.
  void start();
  /// Stops the reflector (cancels its watch) and waits for its loop to end, then stops every
  /// handler (waiting up to handler_stop_timeout in all for running callbacks; a handler still
  /// running then is given up on and logged: its worker is the pool's to compensate).
  /// Idempotent; the informer cannot be restarted. Called by InformerFactory. Throws
  /// std::logic_error when called from this informer's own reflector (a transform, on_synced):
  /// it would wait for itself. Transforms and on_synced run on the reflectors' shared runtime:
  /// stopping other informers from there waits for a free runtime thread; do it from a handler.
  void stop();

 private:
  friend class Registration;
  class Impl;
  /// False when waiting for the handler's running callback gave up (Listener::join).
  bool remove_listener(const std::shared_ptr<detail::Listener>& listener);

  const std::unique_ptr<Impl> impl_;
};

}  // namespace kinformer::informer
