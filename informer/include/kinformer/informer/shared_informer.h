#pragma once
// SharedInformer: one store kept true by one reflector, fanned out to many handlers.

#include <chrono>
#include <compare>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "kinformer/cache/store.h"
#include "kinformer/cache/transform.h"
#include "kinformer/client/resource.h"
#include "kinformer/client/watch.h"
#include "kinformer/informer/event_handler.h"
#include "kinformer/informer/metrics.h"
#include "kinformer/informer/reflector.h"
#include "kinformer/informer/registration.h"

namespace kinformer::informer {

/// What makes two informers the same: everything that changes what the API server sends (the
/// cluster is implied by the factory). Label selectors are canonicalised.
struct InformerKey {
  std::string resource;  ///< GroupVersionResource::to_string()
  std::string namespace_;
  std::string label_selector;
  std::string field_selector;
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
  /// How long stop() waits for a handler's running callback before giving up on joining it.
  std::chrono::milliseconds handler_stop_timeout{5000};
  std::shared_ptr<InformerMetrics> metrics;  ///< required
};

/// A type-erased informer (objects are client::ObjectPtr). Owned by InformerFactory; users get a
/// reference that stays valid until the factory is destroyed.
///
/// Data flow: the reflector thread updates the store first, then enqueues the notification for
/// every handler; each handler has its own bounded, coalescing queue and its own thread (see
/// add_handler()). Handlers never delay the reflector or each other.
///
/// Thread-safety: thread-safe; every public method may be called from any thread, including from
/// inside a handler callback.
class SharedInformer : public std::enable_shared_from_this<SharedInformer>, private ReflectorSink {
 public:
  SharedInformer(InformerKey key, client::ResourceType type, client::ListerWatcherPtr lister_watcher,
                 InformerConfig config);
  ~SharedInformer() override;
  SharedInformer(const SharedInformer&) = delete;
  SharedInformer& operator=(const SharedInformer&) = delete;

  /// Registers a handler. It first receives on_add(o, true) for every object now in the store,
  /// then every later change. Each handler runs on its own thread (serially); its pending
  /// notifications are coalesced per object key, so its queue never holds more than two entries
  /// per key (memory bounded by the cache size, not by the event rate):
  ///   add + update -> add (latest state, initial flag kept)
  ///   add + delete -> nothing (the handler never saw the object)
  ///   update(a,b) + update(b,c) -> update(a,c)
  ///   update(a,b) + delete -> delete
  ///   delete + add -> delete, then add (kept apart: the object was recreated)
  /// Order is preserved per key; across keys, entries are delivered in the order their key first
  /// became pending. Safe to call before or after start(), and from inside a handler.
  Registration add_handler(ResourceEventHandlerPtr handler, HandlerOptions options = {});

  [[nodiscard]] const cache::Store& store() const noexcept { return *store_; }
  [[nodiscard]] std::shared_ptr<const cache::Store> store_ptr() const noexcept { return store_; }
  /// Adds a custom index to the store (existing contents are indexed). See Store::add_index.
  void add_index(std::string name, cache::Store::IndexFunc fn) { store_->add_index(std::move(name), std::move(fn)); }

  /// True once the initial list (or WatchList initial events) is in the store.
  [[nodiscard]] bool has_synced() const;
  /// Waits (real time) until has_synced() or the timeout; returns has_synced().
  bool wait_for_sync(std::chrono::milliseconds timeout) const;
  /// Number of open registrations (the reference count).
  [[nodiscard]] std::size_t handler_count() const;
  [[nodiscard]] const InformerKey& key() const noexcept { return key_; }
  [[nodiscard]] const client::ResourceType& type() const noexcept { return type_; }
  [[nodiscard]] std::string last_sync_resource_version() const;
  [[nodiscard]] std::optional<std::string> transform_name() const;
  [[nodiscard]] bool watch_list_fell_back() const;
  [[nodiscard]] InformerMetrics& metrics() const noexcept { return *config_.metrics; }

  /// Starts the reflector (and resync) thread. Idempotent. Called by InformerFactory.
  void start();
  /// Stops and joins the reflector, cancels its watch, stops every handler (waiting up to
  /// handler_stop_timeout for a running callback; a handler still running then is detached and
  /// logged). Idempotent; the informer cannot be restarted. Called by InformerFactory.
  void stop();

 private:
  friend class Registration;
  void remove_listener(const std::shared_ptr<detail::Listener>& listener);
  void reap_retired();

  // ReflectorSink (reflector thread).
  void on_replace(std::vector<client::ObjectPtr> items, const std::string& resource_version) override;
  void on_event(client::EventType type, client::ObjectPtr object) override;
  void on_resource_version(const std::string& resource_version) override;
  client::ObjectPtr apply_transform(client::ObjectPtr object) const;
  void resync_loop(std::stop_token stop);
  void touch_sync_time();

  const InformerKey key_;
  const client::ResourceType type_;
  client::ListerWatcherPtr lw_;
  InformerConfig config_;
  std::shared_ptr<cache::Store> store_;
  std::unique_ptr<Reflector> reflector_;

  // dist_mu_ serialises store writes + enqueueing against handler registration, so a new handler
  // sees each change either in its snapshot or as a notification, never both, never neither.
  mutable std::mutex dist_mu_;
  std::vector<std::shared_ptr<detail::Listener>> listeners_;  // guarded by dist_mu_
  std::vector<std::shared_ptr<detail::Listener>> retired_;    // guarded by dist_mu_
  bool synced_ = false;                                       // guarded by dist_mu_
  bool started_ = false;                                      // guarded by dist_mu_
  bool stopped_ = false;                                      // guarded by dist_mu_
  mutable std::condition_variable sync_cv_;

  std::mutex thread_mu_;  // start/stop
  std::vector<std::shared_ptr<detail::Listener>> stopping_;  // guarded by thread_mu_: stopped handlers
  std::jthread reflector_thread_;
  std::jthread resync_thread_;
};

}  // namespace kinformer::informer
