#include "cluster_store.h"

#include <algorithm>
#include <utility>

namespace kinformer::mesh {

std::string ClusterSubscription::State::call(const std::function<void(const ClusterHandler&)>& fn) {
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

bool ClusterSubscription::State::close() {
  std::unique_lock lock(mu);
  closed = true;
  if (running && runner == std::this_thread::get_id()) return true;  // from inside its own call
  cv.wait(lock, [&] { return !running; });
  return true;
}

bool ClusterSubscription::State::active() const {
  std::lock_guard lock(mu);
  return !closed;
}

ClusterSubscription::ClusterSubscription(std::shared_ptr<State> state) : Handle(std::move(state)) {}

namespace detail {
namespace {

// The call of one event on one handler.
void deliver(const ClusterHandler& h, const ClusterEvent& e) {
  switch (e.kind) {
    case ClusterEvent::Kind::added:
      if (h.added) h.added(e.now);
      break;
    case ClusterEvent::Kind::updated:
      if (h.updated) h.updated(e.now, e.before);
      break;
    case ClusterEvent::Kind::synced:
      if (h.synced) h.synced(e.now);
      break;
    case ClusterEvent::Kind::removed:
      if (h.removed) h.removed(e.before);
      break;
  }
}

}  // namespace

ClusterStore::ClusterStore(client::Logger log) : log_(std::move(log)) {}

ClusterSubscription ClusterStore::subscribe(ClusterHandler handler) {
  auto state = std::make_shared<ClusterSubscription::State>(std::move(handler));
  std::lock_guard lock(mu_);
  if (cleared_) {
    state->closed = true;  // the registry shut down meanwhile: nothing will be told
  } else {
    subscribers_.push_back({state, false});
  }
  return ClusterSubscription(state);
}

void ClusterStore::drop_closed() {
  std::erase_if(subscribers_, [](const Subscriber& s) {
    std::lock_guard l(s.state->mu);
    return s.state->closed;
  });
}

void ClusterStore::replay() {
  for (;;) {
    std::shared_ptr<ClusterSubscription::State> fresh;
    std::vector<ClusterEvent> now;
    {
      std::lock_guard lock(mu_);
      drop_closed();
      auto it = std::find_if(subscribers_.begin(), subscribers_.end(),
                             [](const Subscriber& s) { return !s.replayed; });
      if (it == subscribers_.end()) return;
      it->replayed = true;
      fresh = it->state;
      // What exists as of now; a publish() after this point reaches the subscriber itself.
      for (const auto& [id, k] : known_) {
        now.push_back({.kind = ClusterEvent::Kind::added, .now = k.cluster});
      }
      for (const auto& [id, k] : known_) {
        if (k.synced) now.push_back({.kind = ClusterEvent::Kind::synced, .now = k.cluster});
      }
    }
    for (const auto& e : now) report(fresh->call([&](const ClusterHandler& h) { deliver(h, e); }));
  }
}

void ClusterStore::publish(const ClusterEvent& event) {
  std::vector<std::shared_ptr<ClusterSubscription::State>> targets;
  {
    std::lock_guard lock(mu_);
    const std::string& id = event.now ? event.now->id : event.before->id;
    switch (event.kind) {
      case ClusterEvent::Kind::added:
      case ClusterEvent::Kind::updated:
        known_[id] = Known{event.now, false};
        break;
      case ClusterEvent::Kind::synced:
        if (auto it = known_.find(id); it != known_.end() && it->second.cluster == event.now) {
          it->second.synced = true;
        }
        break;
      case ClusterEvent::Kind::removed:
        known_.erase(id);
        break;
    }
    drop_closed();
    for (const auto& s : subscribers_) {
      if (s.replayed) targets.push_back(s.state);
    }
  }
  for (const auto& s : targets) {
    report(s->call([&](const ClusterHandler& h) { deliver(h, event); }));
  }
}

void ClusterStore::clear() {
  std::lock_guard lock(mu_);
  cleared_ = true;
  for (const auto& s : subscribers_) {
    std::lock_guard l(s.state->mu);
    s.state->closed = true;  // the registry tells nothing more; active() says so
  }
  subscribers_.clear();
  known_.clear();
}

void ClusterStore::report(const std::string& thrown) const {
  if (!thrown.empty()) {
    log_.error("a cluster subscriber threw; the registry goes on", {{"error", thrown}});
  }
}

}  // namespace detail
}  // namespace kinformer::mesh
