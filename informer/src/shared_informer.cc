#include "kinformer/informer/shared_informer.h"

#include <algorithm>
#include <atomic>

#include "listener.h"

namespace kinformer::informer {
namespace {

std::atomic<std::uint64_t> g_next_handler_id{1};

detail::Notification make(detail::Notification::Kind kind, client::ObjectPtr old_object,
                          client::ObjectPtr object, bool flag) {
  detail::Notification n;
  n.kind = kind;
  n.old_object = std::move(old_object);
  n.object = std::move(object);
  n.flag = flag;
  n.enqueued = std::chrono::steady_clock::now();
  return n;
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

std::string InformerKey::to_string() const {
  std::string s = resource;
  s += " ns=" + (namespace_.empty() ? std::string("*") : namespace_);
  if (!label_selector.empty()) s += " labels=" + label_selector;
  if (!field_selector.empty()) s += " fields=" + field_selector;
  return s;
}

SharedInformer::SharedInformer(InformerKey key, client::ResourceType type,
                               client::ListerWatcherPtr lister_watcher, InformerConfig config)
    : key_(std::move(key)),
      type_(std::move(type)),
      lw_(std::move(lister_watcher)),
      config_(std::move(config)),
      store_(std::make_shared<cache::Store>()) {
  config_.reflector.metrics = config_.metrics.get();
  reflector_ = std::make_unique<Reflector>(*lw_, static_cast<ReflectorSink&>(*this), config_.reflector);
}

SharedInformer::~SharedInformer() { stop(); }

Registration SharedInformer::add_handler(ResourceEventHandlerPtr handler, HandlerOptions options) {
  std::uint64_t id = g_next_handler_id.fetch_add(1);
  std::string name = options.name.empty() ? "handler-" + std::to_string(id) : std::move(options.name);
  auto listener = std::make_shared<detail::Listener>(std::move(handler), std::move(name), id, config_.metrics);
  {
    std::lock_guard lock(dist_mu_);
    if (stopped_) {
      listener->request_stop();
      return Registration(weak_from_this(), std::move(listener));
    }
    store_->for_each([&](const client::ObjectPtr& o) {
      listener->enqueue(make(detail::Notification::Kind::add, nullptr, o, true));
    });
    if (synced_) listener->mark_sync_barrier();
    listeners_.push_back(listener);
    config_.metrics->handlers.Set(static_cast<double>(listeners_.size()));
    listener->start();
  }
  reap_retired();
  return Registration(weak_from_this(), std::move(listener));
}

void SharedInformer::remove_listener(const std::shared_ptr<detail::Listener>& listener) {
  bool self = listener->on_executor_thread();
  {
    std::lock_guard lock(dist_mu_);
    auto it = std::find(listeners_.begin(), listeners_.end(), listener);
    if (it != listeners_.end()) {
      listeners_.erase(it);
      config_.metrics->handlers.Set(static_cast<double>(listeners_.size()));
    }
    listener->request_stop();
    if (self) retired_.push_back(listener);  // its executor exits when this callback returns
  }
  if (!self) listener->join(std::chrono::hours(24 * 365));
  if (!self) reap_retired();
}

void SharedInformer::reap_retired() {
  std::vector<std::shared_ptr<detail::Listener>> done;
  {
    std::lock_guard lock(dist_mu_);
    auto it = std::partition(retired_.begin(), retired_.end(),
                             [](const auto& l) { return !l->exited(); });
    done.assign(std::make_move_iterator(it), std::make_move_iterator(retired_.end()));
    retired_.erase(it, retired_.end());
  }
  for (auto& l : done) l->join(config_.handler_stop_timeout);
}

bool SharedInformer::has_synced() const {
  std::lock_guard lock(dist_mu_);
  return synced_;
}

bool SharedInformer::wait_for_sync(std::chrono::milliseconds timeout) const {
  std::unique_lock lock(dist_mu_);
  return sync_cv_.wait_for(lock, timeout, [this] { return synced_ || stopped_; }) && synced_;
}

std::size_t SharedInformer::handler_count() const {
  std::lock_guard lock(dist_mu_);
  return listeners_.size();
}

std::string SharedInformer::last_sync_resource_version() const {
  return reflector_->last_sync_resource_version();
}

std::optional<std::string> SharedInformer::transform_name() const {
  if (!config_.transform) return std::nullopt;
  return config_.transform->name;
}

bool SharedInformer::watch_list_fell_back() const { return reflector_->watch_list_fell_back(); }

void SharedInformer::start() {
  std::lock_guard tl(thread_mu_);
  {
    std::lock_guard lock(dist_mu_);
    if (started_ || stopped_) return;
    started_ = true;
  }
  reflector_thread_ = std::jthread([this](std::stop_token stop) { reflector_->run(stop); });
  if (config_.resync.count() > 0) {
    resync_thread_ = std::jthread([this](std::stop_token stop) { resync_loop(stop); });
  }
}

void SharedInformer::stop() {
  std::vector<std::shared_ptr<detail::Listener>> listeners;
  {
    // Every caller (also a second, concurrent one) returns only after the reflector and resync
    // threads are joined. Handlers are joined outside thread_mu_: a handler that itself calls
    // stop() (e.g. through InformerFactory::shutdown()) must not wait for a stop() that is
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
      if (reflector_thread_.joinable()) {
        reflector_thread_.request_stop();
        reflector_thread_.join();
      }
      if (resync_thread_.joinable()) {
        resync_thread_.request_stop();
        resync_thread_.join();
      }
      {
        std::lock_guard lock(dist_mu_);
        stopping_ = std::move(listeners_);
        listeners_.clear();
        for (auto& l : retired_) stopping_.push_back(std::move(l));
        retired_.clear();
        config_.metrics->handlers.Set(0);
      }
      for (auto& l : stopping_) l->request_stop();
    }
    listeners = stopping_;
  }
  for (auto& l : listeners) {
    if (!l->on_executor_thread()) l->join(config_.handler_stop_timeout);
  }
}

client::ObjectPtr SharedInformer::apply_transform(client::ObjectPtr object) const {
  if (!object || !config_.transform || !config_.transform->fn) return object;
  return config_.transform->fn(std::move(object));
}

void SharedInformer::touch_sync_time() { config_.metrics->last_sync_timestamp.Set(unix_now()); }

void SharedInformer::on_replace(std::vector<client::ObjectPtr> items, const std::string& rv) {
  using K = detail::Notification::Kind;
  if (config_.transform) {
    for (auto& o : items) o = apply_transform(std::move(o));
  }
  {
    std::lock_guard lock(dist_mu_);
    bool initial = !synced_;
    auto changes = store_->replace(std::move(items), rv);
    for (auto& ch : changes) {
      for (auto& l : listeners_) {
        switch (ch.type) {
          case cache::StoreChange::Type::added:
            l->enqueue(make(K::add, nullptr, ch.object, initial));
            break;
          case cache::StoreChange::Type::updated:
            l->enqueue(make(K::update, ch.old_object, ch.object, false));
            break;
          case cache::StoreChange::Type::deleted:
            l->enqueue(make(K::del, nullptr, ch.object, /*final_state_unknown=*/true));
            break;
        }
      }
    }
    if (initial) {
      synced_ = true;
      for (auto& l : listeners_) l->mark_sync_barrier();
    }
    config_.metrics->objects.Set(static_cast<double>(store_->size()));
  }
  touch_sync_time();
  sync_cv_.notify_all();
}

void SharedInformer::on_event(client::EventType type, client::ObjectPtr object) {
  using K = detail::Notification::Kind;
  std::string key = object->key();
  if (type != client::EventType::deleted) object = apply_transform(std::move(object));
  {
    std::lock_guard lock(dist_mu_);
    if (type == client::EventType::deleted || !object) {
      // A transform returning null drops the object: treat it as absent.
      auto removed = store_->remove(key);
      if (removed) {
        client::ObjectPtr final_state = object ? object : removed->object;
        if (type == client::EventType::deleted && object) final_state = apply_transform(object);
        if (!final_state) final_state = removed->object;
        for (auto& l : listeners_) l->enqueue(make(K::del, nullptr, final_state, false));
      }
    } else {
      auto ch = store_->upsert(object);
      for (auto& l : listeners_) {
        if (ch.type == cache::StoreChange::Type::added) {
          l->enqueue(make(K::add, nullptr, ch.object, false));
        } else {
          l->enqueue(make(K::update, ch.old_object, ch.object, false));
        }
      }
    }
    if (object && !object->metadata.resource_version.empty()) {
      store_->set_resource_version(object->metadata.resource_version);
    }
    config_.metrics->objects.Set(static_cast<double>(store_->size()));
  }
  touch_sync_time();
}

void SharedInformer::on_resource_version(const std::string& rv) {
  store_->set_resource_version(rv);
  touch_sync_time();
}

void SharedInformer::resync_loop(std::stop_token stop) {
  using K = detail::Notification::Kind;
  ClockPtr clock = config_.reflector.clock ? config_.reflector.clock : system_clock();
  while (clock->sleep_for(config_.resync, stop)) {
    std::lock_guard lock(dist_mu_);
    if (!synced_) continue;
    store_->for_each([&](const client::ObjectPtr& o) {
      for (auto& l : listeners_) l->enqueue(make(K::update, o, o, false));
    });
  }
}

}  // namespace kinformer::informer
