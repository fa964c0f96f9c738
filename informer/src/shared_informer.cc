#include "kinformer/informer/shared_informer.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <exception>
#include <functional>
#include <stdexcept>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/strand.hpp>

#include "detail/await.h"
#include "detail/delivering.h"
#include "detail/unix_time.h"
#include "io_runtime_impl.h"
#include "listener.h"
#include "observed_lister_watcher.h"
#include "shared_informer_impl.h"

// GCC 12 takes Asio's coroutine frame allocator for a mismatched new/delete when it inlines a
// frame's destruction: a false positive (GCC bug 109224).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace kinformer::informer {
namespace {

namespace asio = boost::asio;

std::atomic<std::uint64_t> g_next_handler_id{1};

// The informer whose reflector this thread is delivering to (its sink), else null: stop() from
// there would wait for itself.
thread_local const SharedInformer* tl_delivering = nullptr;
struct Delivering {
  explicit Delivering(const SharedInformer* informer) : previous(tl_delivering) {
    tl_delivering = informer;
  }
  ~Delivering() { tl_delivering = previous; }
  Delivering(const Delivering&) = delete;
  Delivering& operator=(const Delivering&) = delete;
  const SharedInformer* previous;
};

// Where reflectors run unless their informer is given a runtime: one per process, made with the
// first informer that starts and never stopped (informers of any lifetime, in any static order,
// may still use it).
client::IoRuntimePtr shared_runtime() {
  static auto* runtime = new client::IoRuntimePtr(  // NOLINT(cppcoreguidelines-owning-memory)
      std::make_shared<client::IoRuntime>(client::IoRuntime::default_threads()));
  return *runtime;
}

}  // namespace

const SharedInformer* detail::delivering_informer() noexcept { return tl_delivering; }

std::string InformerKey::to_string() const {
  std::string s = resource;
  s += " ns=" + (namespace_.empty() ? std::string("*") : namespace_);
  if (!label_selector.empty()) s += " labels=" + label_selector;
  if (!field_selector.empty()) s += " fields=" + field_selector;
  return s;
}

SharedInformer::Impl::Impl(InformerKey key, client::ResourceType type,
                           client::ListerWatcherPtr lister_watcher, InformerConfig config)
    : key_(std::move(key)),
      type_(std::move(type)),
      lw_(std::move(lister_watcher)),
      config_(std::move(config)),
      store_(std::make_shared<cache::Store>()) {
  config_.reflector.metrics = config_.metrics.get();
  if (config_.reflector.name.empty()) config_.reflector.name = key_.to_string();
  config_.reflector.log = config_.log;
  if (config_.executor) {
    executor_ = config_.executor;
  } else {
    HandlerExecutorOptions executor_options;
    executor_options.log = config_.log.sink();
    executor_ = std::make_shared<HandlerExecutor>(executor_options);
  }
  log_ = config_.log.with("informer", {{"informer", key_.to_string()}});
  observed_ = std::make_unique<detail::ObservedListerWatcher>(*lw_, *config_.metrics);
  reflector_ = std::make_unique<Reflector>(*observed_, static_cast<ReflectorSink&>(*this),
                                           config_.reflector);
}

// stop() throws only when the informer is destroyed from its own reflector, a wait for itself:
// terminating then is right.
// NOLINTNEXTLINE(bugprone-exception-escape)
SharedInformer::Impl::~Impl() { stop(); }

std::shared_ptr<detail::Listener> SharedInformer::Impl::add_handler(ResourceEventHandlerPtr handler,
                                                                    HandlerOptions options) {
  std::uint64_t id = g_next_handler_id.fetch_add(1);
  std::string name =
      options.name.empty() ? "handler-" + std::to_string(id) : std::move(options.name);
  auto listener =
      std::make_shared<detail::Listener>(std::move(handler), std::move(name), id, config_.metrics,
                                         executor_, log_, config_.reflector.clock);
  std::lock_guard lock(dist_mu_);
  if (stopped_) {
    listener->request_stop();
    return listener;
  }
  std::vector<detail::Delta> snapshot;
  snapshot.reserve(store_->size());
  store_->for_each([&](const client::ObjectPtr& o) {
    snapshot.push_back(detail::make_delta(detail::Notification::Kind::add, nullptr, o, true));
  });
  if (auto* strand = listener->enqueue(snapshot, config_.reflector.clock->now())) strand->wake();
  if (synced_) listener->mark_sync_barrier();
  auto next = std::make_shared<ListenerList>(*listeners_);
  next->push_back(listener);
  set_listeners_locked(std::move(next));
  listener->start();
  return listener;
}

void SharedInformer::Impl::set_listeners_locked(std::shared_ptr<const ListenerList> next) {
  listeners_ = std::move(next);
  handler_count_.store(listeners_->size());
  config_.metrics->handlers.set(static_cast<double>(listeners_->size()));
}

bool SharedInformer::Impl::remove_listener(const std::shared_ptr<detail::Listener>& listener) {
  {
    std::lock_guard lock(dist_mu_);
    auto it = std::find(listeners_->begin(), listeners_->end(), listener);
    if (it != listeners_->end()) {
      auto next = std::make_shared<ListenerList>(*listeners_);
      next->erase(next->begin() + (it - listeners_->begin()));
      set_listeners_locked(std::move(next));
    }
  }
  listener->request_stop();
  // Returns at once from the handler's own callback; see Listener::join for a callback of
  // another handler.
  return listener->join(std::chrono::hours(24 * 365));
}

void SharedInformer::Impl::fan_out(const ListenerList& to, std::span<const detail::Delta> batch,
                                   bool barrier) {
  // A large batch (a list) goes out in chunks, each to every handler in turn: all handlers start
  // on it at once, and a chunk's objects are still in the cache for the next handler.
  constexpr std::size_t kChunk = 256;
  static_assert(kChunk >= Reflector::kMaxEventBatch, "a batch of watch events is one chunk");
  auto now = config_.reflector.clock->now();
  std::vector<HandlerExecutor::Strand*>& wake = wake_;  // fanout_mu_ held: reused
  wake.clear();  // after an exception in an earlier call, it may hold stale pointers
  for (std::size_t at = 0; at < batch.size(); at += kChunk) {
    auto chunk = batch.subspan(at, std::min(kChunk, batch.size() - at));
    for (const auto& l : to) {
      if (auto* strand = l->enqueue(chunk, now)) wake.push_back(strand);
    }
    HandlerExecutor::wake_all(wake);
    wake.clear();
  }
  if (barrier) {
    for (const auto& l : to) l->mark_sync_barrier();
  }
}

bool SharedInformer::Impl::has_synced() const { return synced_.load(); }

bool SharedInformer::Impl::wait_for_sync(std::chrono::milliseconds timeout) const {
  std::unique_lock lock(dist_mu_);
  return sync_cv_.wait_for(lock, timeout, [this] { return synced_ || stopped_; }) && synced_;
}

std::size_t SharedInformer::Impl::handler_count() const {
  std::lock_guard lock(dist_mu_);
  return listeners_->size();
}

std::string SharedInformer::Impl::last_sync_resource_version() const {
  return reflector_->last_sync_resource_version();
}

Freshness SharedInformer::Impl::freshness() const { return reflector_->freshness(); }

namespace {

// A resourceVersion as the integer Kubernetes 1.35 made it (KEP-5504); nullopt when it is not a
// plain decimal integer.
std::optional<std::uint64_t> comparable_rv(std::string_view rv) {
  std::uint64_t value = 0;
  auto [ptr, ec] = std::from_chars(rv.data(), rv.data() + rv.size(), value);
  if (rv.empty() || ec != std::errc() || ptr != rv.data() + rv.size()) return std::nullopt;
  return value;
}

// Whether a store at version `current` has seen `wanted`; nullopt when `current` is not an
// integer (nothing seen yet, or a server whose versions are opaque).
std::optional<bool> observed(std::string_view current, std::uint64_t wanted) {
  const auto seen = comparable_rv(current);
  if (!seen) return std::nullopt;
  return *seen >= wanted;
}

}  // namespace

std::optional<bool> SharedInformer::Impl::has_observed(std::string_view rv) const {
  const auto wanted = comparable_rv(rv);
  if (!wanted) return std::nullopt;
  return observed(store_->resource_version(), *wanted);
}

std::optional<bool> SharedInformer::Impl::wait_for_resource_version(
    std::string_view rv, std::chrono::milliseconds timeout) const {
  if (!comparable_rv(rv)) return std::nullopt;
  std::unique_lock lock(rv_mu_);
  const std::uint64_t wanted = *comparable_rv(rv);
  std::optional<bool> result;
  // At most a day: a larger timeout would overflow the wait.
  rv_cv_.wait_for(lock, std::min<std::chrono::milliseconds>(timeout, std::chrono::hours(24)), [&] {
    // One read of the store's version: seen (done), not yet (wait), opaque (done: unknown).
    const std::string current = store_->resource_version();
    if (current.empty()) return false;  // nothing yet: wait (the result stays unknown)
    result = observed(current, wanted);
    return !result || *result;
  });
  return result;
}

void SharedInformer::Impl::resource_version_advanced() {
  { std::lock_guard lock(rv_mu_); }  // a waiter between its check and its wait is woken too
  rv_cv_.notify_all();
}

std::optional<std::string> SharedInformer::Impl::transform_name() const {
  if (!config_.transform) return std::nullopt;
  return config_.transform->name;
}

bool SharedInformer::Impl::watch_list_fell_back() const {
  return reflector_->watch_list_fell_back();
}

std::optional<SyncError> SharedInformer::Impl::last_error() const {
  return observed_->last_error();
}

void SharedInformer::Impl::start() {
  std::lock_guard tl(thread_mu_);
  {
    std::lock_guard lock(dist_mu_);
    if (started_ || stopped_) return;
    started_ = true;
  }
  if (!runtime_) runtime_ = config_.runtime ? config_.runtime : shared_runtime();
  const bool resync = config_.resync.count() > 0;
  // Nothing of this informer is touched once loop_mu_ is released: stop() may go on.
  auto ended = [this] {
    std::lock_guard lock(loop_mu_);
    --loops_running_;
    loop_cv_.notify_all();
  };
  {
    std::lock_guard lock(loop_mu_);
    ++loops_running_;
  }
  try {
    reflector_->start(*runtime_, reflector_stop_.get_token(), ended);
  } catch (...) {
    ended();  // not started: stop() must not wait for it
    throw;
  }
  if (resync) {
    {
      std::lock_guard lock(loop_mu_);
      ++loops_running_;
    }
    struct Undo {  // the resync loop was not spawned: stop() must not wait for it
      std::function<void()> ended;
      bool armed = true;
      ~Undo() {
        if (armed) ended();
      }
    } undo{ended};
    asio::co_spawn(
        asio::make_strand(runtime_->impl().ioc),
        [this, stop = reflector_stop_.get_token()]() -> detail::awaitable<void> {
          const ClockPtr& clock = config_.reflector.clock;
          const Clock::Duration period = config_.resync;
          for (;;) {
            const bool slept = co_await detail::sleep_for(clock, period, stop);
            if (!slept) co_return;
            resync_once();
          }
        },
        [ended](const std::exception_ptr& e) {
          // As on a thread of its own: what the loop does not handle ends the process.
          if (!detail::ended_by_stop(e)) std::rethrow_exception(e);
          ended();
        });
    undo.armed = false;
  }
}

void SharedInformer::Impl::stop() {
  if (tl_delivering == owner_) {
    throw std::logic_error("SharedInformer " + key_.to_string() +
                           ": stop() from its own reflector (a transform or on_synced) would "
                           "wait for itself");
  }
  ListenerList listeners;
  {
    // Every caller (also a second, concurrent one) returns only after the reflector's and the
    // resync loops ended. Handlers are waited for outside thread_mu_: a handler that itself
    // calls stop() (e.g. through InformerFactory::shutdown()) must not wait for a stop() that is
    // waiting for that handler.
    std::lock_guard tl(thread_mu_);
    bool first = false;
    {
      std::lock_guard lock(dist_mu_);
      first = !stopped_;
      stopped_ = true;
    }
    if (first) {
      sync_cv_.notify_all();
      reflector_stop_.request_stop();
      {
        std::unique_lock lock(loop_mu_);
        loop_cv_.wait(lock, [this] { return loops_running_ == 0; });
      }
      {
        std::lock_guard lock(dist_mu_);
        stopping_ = *listeners_;
        set_listeners_locked(std::make_shared<ListenerList>());
      }
      for (auto& l : stopping_) l->request_stop();
    }
    listeners = stopping_;
  }
  // One deadline for all handlers: shutdown stays bounded however many are stuck.
  auto deadline = std::chrono::steady_clock::now() + config_.handler_stop_timeout;
  for (auto& l : listeners) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    l->join(std::max(left, std::chrono::milliseconds(0)));
  }
}

client::ObjectPtr SharedInformer::Impl::apply_transform(client::ObjectPtr object) const {
  if (!object || !config_.transform || !config_.transform->fn) return object;
  return config_.transform->fn(std::move(object));
}

void SharedInformer::Impl::touch_sync_time() {
  config_.metrics->last_sync_timestamp.set(detail::unix_now());
}

void SharedInformer::Impl::on_replace(std::vector<client::ObjectPtr> items, const std::string& rv) {
  Delivering delivering(owner_);
  using K = detail::Notification::Kind;
  if (config_.transform) {
    for (auto& o : items) o = apply_transform(std::move(o));
  }
  std::vector<detail::Delta> batch;
  std::shared_ptr<const ListenerList> to;
  bool initial = false;
  std::unique_lock fanout(fanout_mu_);
  {
    std::lock_guard lock(dist_mu_);
    initial = !synced_;
    auto changes = store_->replace(std::move(items), rv);
    batch.reserve(changes.size());
    for (auto& ch : changes) {
      switch (ch.type) {
        case cache::StoreChange::Type::added:
          batch.push_back({K::add, nullptr, ch.object, initial, 0});
          break;
        case cache::StoreChange::Type::updated:
          batch.push_back({K::update, std::move(ch.old_object), ch.object, false, 0});
          break;
        case cache::StoreChange::Type::deleted:
          batch.push_back({K::del, nullptr, ch.object, /*final_state_unknown=*/true, 0});
          break;
      }
    }
    if (initial) synced_ = true;
    to = listeners_;
    config_.metrics->objects.set(static_cast<double>(store_->size()));
  }
  sync_cv_.notify_all();  // has_synced() does not wait for the handlers
  for (auto& d : batch) d.hash = detail::key_hash(d.object->metadata);  // once for all handlers
  fan_out(*to, batch, initial);
  touch_sync_time();
  fanout.unlock();
  resource_version_advanced();
  if (initial && config_.on_synced) {
    try {
      config_.on_synced();
    } catch (const std::exception& e) {
      log_.error("a sync listener threw", {{"error", e.what()}});
    } catch (...) {
      log_.error("a sync listener threw", {{"error", "non-standard exception"}});
    }
  }
}

void SharedInformer::Impl::on_event(client::EventType type, client::ObjectPtr object) {
  client::WatchEvent event{type, std::move(object)};
  on_events(std::span<client::WatchEvent>(&event, 1));
}

void SharedInformer::Impl::on_events(std::span<client::WatchEvent> events) {
  Delivering delivering(owner_);
  // In parts of at most kMaxHandOff notifications (events x handlers): the first event of a part
  // waits for the part's hand-off to every handler, so a long batch (a stream catching up) must
  // not add its whole length to that wait. With one handler a part is the whole batch; with
  // kMaxHandOff handlers or more, every event is handed off on its own.
  const std::size_t handlers = std::max<std::size_t>(1, handler_count_.load());
  const std::size_t part = std::max<std::size_t>(1, kMaxHandOff / handlers);
  for (std::size_t at = 0; at < events.size(); at += part) {
    apply_events(events.subspan(at, std::min(part, events.size() - at)));
  }
}

void SharedInformer::Impl::apply_events(std::span<client::WatchEvent> events) {
  using K = detail::Notification::Kind;
  // Keys, and the transforms of added and modified objects, before the locks (a null result
  // drops the object, and its key is the one it had); a deleted object's final state is
  // transformed under the lock, only when it was in the store, as before batching.
  std::vector<std::string>& keys = event_keys_;
  std::vector<detail::Delta>& batch = event_batch_;
  keys.clear();
  batch.clear();
  for (auto& e : events) {
    keys.push_back(e.object->key());
    if (e.type != client::EventType::deleted) e.object = apply_transform(std::move(e.object));
  }
  std::shared_ptr<const ListenerList> to;
  std::lock_guard fanout(fanout_mu_);
  {
    std::lock_guard lock(dist_mu_);
    const std::string* rv = nullptr;  // the last event's with one: set once, after the changes
    for (std::size_t i = 0; i < events.size(); ++i) {
      const client::EventType type = events[i].type;
      client::ObjectPtr& object = events[i].object;
      if (type == client::EventType::deleted || !object) {
        // A transform returning null drops the object: treat it as absent.
        auto removed = store_->remove(keys[i]);
        if (removed) {
          client::ObjectPtr final_state = object ? object : removed->object;
          if (type == client::EventType::deleted && object) final_state = apply_transform(object);
          if (!final_state) final_state = removed->object;
          batch.push_back(detail::Delta{K::del, nullptr, std::move(final_state), false, 0});
        }
      } else {
        auto ch = store_->upsert(object);
        if (ch.type == cache::StoreChange::Type::added) {
          batch.push_back(detail::Delta{K::add, nullptr, ch.object, false, 0});
        } else {
          batch.push_back(detail::Delta{K::update, ch.old_object, ch.object, false, 0});
        }
      }
      if (object && !object->metadata.resource_version.empty()) {
        rv = &object->metadata.resource_version;
      }
    }
    if (rv != nullptr) store_->set_resource_version(*rv);
    to = listeners_;
    config_.metrics->objects.set(static_cast<double>(store_->size()));
  }
  if (!batch.empty()) {
    for (auto& d : batch) d.hash = detail::key_hash(d.object->metadata);  // once for all handlers
    fan_out(*to, batch, false);
  }
  batch.clear();
  keys.clear();
  touch_sync_time();
  resource_version_advanced();
}

void SharedInformer::Impl::on_resource_version(const std::string& rv) {
  store_->set_resource_version(rv);
  touch_sync_time();
  resource_version_advanced();
}

void SharedInformer::Impl::resync_once() {
  using K = detail::Notification::Kind;
  // Under fanout_mu_ and dist_mu_: a resync must not come between a change the reflector
  // stored and its notification, nor hand out a state older than a stored change.
  std::lock_guard fanout(fanout_mu_);
  std::lock_guard lock(dist_mu_);
  if (!synced_) return;
  std::vector<detail::Delta> batch;
  batch.reserve(store_->size());
  store_->for_each([&](const client::ObjectPtr& o) {
    batch.push_back(detail::make_delta(K::update, o, o, false));
  });
  fan_out(*listeners_, batch, false);
}

SharedInformer::SharedInformer(InformerKey key, client::ResourceType type,
                               client::ListerWatcherPtr lister_watcher, InformerConfig config)
    : impl_(std::make_unique<Impl>(std::move(key), std::move(type), std::move(lister_watcher),
                                   std::move(config))) {
  impl_->owner_ = this;
}

// Stopped while the whole informer is alive: a handler still running during the stop may call
// back into it (store(), handler_count(), ...). Stopping again in ~Impl does nothing.
SharedInformer::~SharedInformer() {
  try {
    impl_->stop();
  } catch (const std::exception&) {
    std::terminate();  // destroyed on its own reflector: it cannot wait for itself (see stop())
  }
}

Registration SharedInformer::add_handler(ResourceEventHandlerPtr handler, HandlerOptions options) {
  return Registration(weak_from_this(), impl_->add_handler(std::move(handler), std::move(options)));
}

bool SharedInformer::remove_listener(const std::shared_ptr<detail::Listener>& listener) {
  return impl_->remove_listener(listener);
}

const cache::Store& SharedInformer::store() const noexcept { return *impl_->store(); }
std::shared_ptr<const cache::Store> SharedInformer::store_ptr() const noexcept {
  return impl_->store();
}
void SharedInformer::add_index(std::string name, cache::Store::IndexFunc fn) {
  impl_->store()->add_index(std::move(name), std::move(fn));
}
bool SharedInformer::has_synced() const { return impl_->has_synced(); }
bool SharedInformer::wait_for_sync(std::chrono::milliseconds timeout) const {
  return impl_->wait_for_sync(timeout);
}
std::size_t SharedInformer::handler_count() const { return impl_->handler_count(); }
const InformerKey& SharedInformer::key() const noexcept { return impl_->key(); }
const client::ResourceType& SharedInformer::type() const noexcept { return impl_->type(); }
std::string SharedInformer::last_sync_resource_version() const {
  return impl_->last_sync_resource_version();
}
std::optional<std::string> SharedInformer::transform_name() const {
  return impl_->transform_name();
}
bool SharedInformer::watch_list_fell_back() const { return impl_->watch_list_fell_back(); }
Freshness SharedInformer::freshness() const { return impl_->freshness(); }
std::optional<bool> SharedInformer::has_observed(std::string_view rv) const {
  return impl_->has_observed(rv);
}
std::optional<bool> SharedInformer::wait_for_resource_version(
    std::string_view rv, std::chrono::milliseconds timeout) const {
  return impl_->wait_for_resource_version(rv, timeout);
}
std::optional<SyncError> SharedInformer::last_error() const { return impl_->last_error(); }
InformerMetrics& SharedInformer::metrics() const noexcept { return impl_->metrics(); }
void SharedInformer::start() { impl_->start(); }
void SharedInformer::stop() { impl_->stop(); }

}  // namespace kinformer::informer
