#pragma once
// SharedInformer::Impl: the informer's state and the reflector's sink, kept out of the public
// header (the threading contract is SharedInformer's).

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <span>
#include <stop_token>
#include <string>
#include <vector>

#include "kinformer/informer/shared_informer.h"

namespace kinformer::informer {

namespace detail {
struct Delta;
class ObservedListerWatcher;
}  // namespace detail

class SharedInformer::Impl final : public ReflectorSink {
 public:
  Impl(InformerKey key, client::ResourceType type, client::ListerWatcherPtr lister_watcher,
       InformerConfig config);
  // NOLINTNEXTLINE(bugprone-exception-escape): see stop(); from its own reflector: terminate
  ~Impl() override;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  /// The SharedInformer this is the state of (set by its constructor): what
  /// detail::delivering_informer() names while this informer's reflector calls out.
  const SharedInformer* owner_ = nullptr;

  // The public methods of SharedInformer, which forwards to these.
  // The new handler's listener (already stopped after stop()).
  std::shared_ptr<detail::Listener> add_handler(ResourceEventHandlerPtr handler,
                                                HandlerOptions options);
  [[nodiscard]] bool has_synced() const;
  bool wait_for_sync(std::chrono::milliseconds timeout) const;
  [[nodiscard]] std::size_t handler_count() const;
  [[nodiscard]] std::string last_sync_resource_version() const;
  [[nodiscard]] std::optional<std::string> transform_name() const;
  [[nodiscard]] bool watch_list_fell_back() const;
  [[nodiscard]] Freshness freshness() const;
  [[nodiscard]] std::optional<bool> has_observed(std::string_view rv) const;
  std::optional<bool> wait_for_resource_version(std::string_view rv,
                                                std::chrono::milliseconds timeout) const;
  [[nodiscard]] std::optional<SyncError> last_error() const;
  void start();
  void stop();

  /// False when waiting for the handler's running callback gave up (Listener::join).
  bool remove_listener(const std::shared_ptr<detail::Listener>& listener);

  [[nodiscard]] const InformerKey& key() const noexcept { return key_; }
  [[nodiscard]] const client::ResourceType& type() const noexcept { return type_; }
  [[nodiscard]] const std::shared_ptr<cache::Store>& store() const noexcept { return store_; }
  [[nodiscard]] InformerMetrics& metrics() const noexcept { return *config_.metrics; }

 private:
  using ListenerList = std::vector<std::shared_ptr<detail::Listener>>;

  // Replaces listeners_ and what mirrors it (handler_count_, the handlers gauge). dist_mu_ held.
  void set_listeners_locked(std::shared_ptr<const ListenerList> next);
  // Hands one batch to every listener of `to` (outside dist_mu_), then marks their sync barrier.
  // fanout_mu_ held.
  void fan_out(const ListenerList& to, std::span<const detail::Delta> batch, bool barrier);

  // ReflectorSink (the reflector's loop).
  void on_replace(std::vector<client::ObjectPtr> items,
                  const std::string& resource_version) override;
  void on_event(client::EventType type, client::ObjectPtr object) override;
  // apply_events() for `events`, in parts of max(1, kMaxHandOff / handlers) events.
  void on_events(std::span<client::WatchEvent> events) override;
  // One store update (under dist_mu_) and one hand-off to the listeners for all of `events`.
  void apply_events(std::span<client::WatchEvent> events);
  void on_resource_version(const std::string& resource_version) override;
  client::ObjectPtr apply_transform(client::ObjectPtr object) const;
  // One resync: update(o, o) of every cached object to every handler (the resync loop, on the
  // runtime, every InformerConfig::resync).
  void resync_once();
  void touch_sync_time();

  const InformerKey key_;
  const client::ResourceType type_;
  client::ListerWatcherPtr lw_;
  InformerConfig config_;
  std::unique_ptr<detail::ObservedListerWatcher> observed_;  // wraps *lw_; the reflector's
  std::shared_ptr<cache::Store> store_;
  std::unique_ptr<Reflector> reflector_;

  HandlerExecutorPtr executor_;
  client::Logger log_;  // component "informer", informer="<key>"

  // dist_mu_ serialises store writes + taking the listener list against handler registration:
  // a change is in the store before the list it goes to is taken, and a new handler's snapshot
  // and its entry in the list are made together, so it sees each change either in its snapshot
  // or as a notification, never both, never neither. Handing the batch to the listeners happens
  // after dist_mu_ is released, under fanout_mu_, so order is kept.
  mutable std::mutex dist_mu_;
  // fanout_mu_ (taken before dist_mu_) spans a store write and its hand-off to the listeners, for
  // the reflector and the resync loop alike: a resync can never slip its update(o, o) in
  // between a change and its notification (it would absorb the add or the update).
  std::mutex fanout_mu_;
  std::vector<HandlerExecutor::Strand*> wake_;  // guarded by fanout_mu_: fan_out's scratch
  // apply_events' scratch, the reflector's loop only (kept between parts for their capacity;
  // emptied after each, so that they hold no object).
  std::vector<std::string> event_keys_;
  std::vector<detail::Delta> event_batch_;
  std::shared_ptr<const ListenerList> listeners_ =
      std::make_shared<ListenerList>();        // guarded by dist_mu_ (copy on write)
  std::atomic<std::size_t> handler_count_{0};  // listeners_->size(), written under dist_mu_
  std::atomic<bool> synced_{false};            // written under dist_mu_
  bool started_ = false;                       // guarded by dist_mu_
  bool stopped_ = false;                       // guarded by dist_mu_
  mutable std::condition_variable sync_cv_;
  // wait_for_resource_version(): woken after the store's resourceVersion advanced (the state it
  // guards is the store's, read under the store's own lock).
  mutable std::mutex rv_mu_;
  mutable std::condition_variable rv_cv_;
  void resource_version_advanced();

  std::mutex thread_mu_;             // start/stop
  ListenerList stopping_;            // guarded by thread_mu_: the handlers stop() stopped
  client::IoRuntimePtr runtime_;     // the reflector's and the resync loops run on its threads
  std::stop_source reflector_stop_;  // stop() ends both loops
  std::mutex loop_mu_;
  std::condition_variable loop_cv_;
  int loops_running_ = 0;  // guarded by loop_mu_: started by start(), not ended yet
};

}  // namespace kinformer::informer
