#pragma once
// Test doubles for informer tests: a scripted in-memory ListerWatcher, a manual clock that records
// every requested wait, and a recording handler. Every wait here is a condition wait with a
// deadline: no sleeps.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "../cache/test_object.h"
#include "kinformer/client/resource.h"
#include "kinformer/client/watch.h"
#include "kinformer/informer/clock.h"
#include "kinformer/informer/event_handler.h"

namespace kinformer::testing {

inline constexpr std::chrono::seconds kDeadline{20};

/// Waits on `cv` until `pred` or the deadline; returns pred().
template <typename Pred>
bool wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, Pred pred) {
  return cv.wait_for(lock, kDeadline, pred);
}

/// Polls `pred` (every millisecond, via a timed condition wait) until true or the deadline.
template <typename Pred>
bool eventually(Pred pred) {
  std::mutex mu;
  std::condition_variable cv;
  std::unique_lock lock(mu);
  auto deadline = std::chrono::steady_clock::now() + kDeadline;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    cv.wait_for(lock, std::chrono::milliseconds(1));
  }
  return true;
}

/// A one-shot event: open() once, wait() until opened or the deadline (a failure guard, generous
/// for TSan on a loaded machine).
class Gate {
 public:
  // Notifies under the lock: a waiter that returns may destroy the gate at once.
  void open() {
    std::lock_guard lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  bool wait(std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [this] { return open_; });
  }
  bool is_open() const {
    std::lock_guard lock(mu_);
    return open_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;  // guarded by mu_
};

inline client::ResourceType test_type(std::string resource = "pods") {
  client::ResourceType t;
  t.gvr = {"", "v1", std::move(resource), "Pod", true};
  return t;
}

inline client::Error api_error(int status, std::string reason,
                               std::optional<std::chrono::seconds> retry_after = std::nullopt) {
  client::Error e = client::Error::make(client::Errc::api, "scripted " + reason);
  e.http_status = status;
  e.reason = std::move(reason);
  e.retry_after = retry_after;
  return e;
}

/// The Status of a relist or watch at a resourceVersion the server (etcd) has not reached, e.g.
/// after an etcd restore: 504, reason Timeout, cause ResourceVersionTooLarge, retry after 1 s.
inline client::Error too_large_rv_error() {
  client::Error e = api_error(504, "Timeout", std::chrono::seconds(1));
  e.message = "Timeout: Too large resource version: 20, current: 10";
  e.causes = {"ResourceVersionTooLarge"};
  return e;
}

inline client::WatchEvent event(client::EventType type, client::ObjectPtr o) {
  return {type, std::move(o)};
}

inline client::WatchEvent bookmark(std::string rv, bool initial_events_end = false) {
  auto o = std::make_shared<TestObject>();
  o->metadata.resource_version = std::move(rv);
  if (initial_events_end) o->metadata.annotations = {{"k8s.io/initial-events-end", "true"}};
  return {client::EventType::bookmark, o};
}

/// One scripted watch stream: events, then an error or a clean end; when the script runs out
/// the stream blocks until more is pushed or it is cancelled.
class WatchScript {
 public:
  struct End {};
  using Item = std::variant<client::WatchEvent, client::Error, End>;

  WatchScript& push(client::WatchEvent e) { return add(std::move(e)); }
  WatchScript& fail(client::Error e) { return add(std::move(e)); }
  WatchScript& end() { return add(End{}); }

  Item next() {
    std::unique_lock lock(mu_);
    ++waiting_;
    cv_.notify_all();
    cv_.wait(lock, [this] { return cancelled_ || !items_.empty(); });
    --waiting_;
    if (cancelled_) return client::Error::make(client::Errc::cancelled, "cancelled");
    Item i = std::move(items_.front());
    items_.pop_front();
    return i;
  }
  void cancel() {
    std::lock_guard lock(mu_);
    cancelled_ = true;
    cv_.notify_all();
  }
  /// The events next() returns without blocking (the leading events of the script).
  std::size_t buffered() {
    std::lock_guard lock(mu_);
    if (cancelled_) return 0;
    std::size_t n = 0;  // bounded: a hint, and the reflector takes at most 256 at once
    while (n < items_.size() && n < 1024 && std::holds_alternative<client::WatchEvent>(items_[n])) {
      ++n;
    }
    return n;
  }
  /// True only once cancel() was called (WatchStream::cancel), not when the stream was merely
  /// destroyed: tests of cancellation must see the cancel itself.
  bool cancelled() {
    std::lock_guard lock(mu_);
    return cancelled_;
  }
  void mark_destroyed() {
    std::lock_guard lock(mu_);
    destroyed_ = true;
  }
  bool destroyed() {
    std::lock_guard lock(mu_);
    return destroyed_;
  }
  /// Waits until a reader is blocked in next() on an empty script.
  bool wait_reader_blocked() {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kDeadline, [this] { return waiting_ > 0 && items_.empty(); });
  }

 private:
  WatchScript& add(Item i) {
    std::lock_guard lock(mu_);
    items_.push_back(std::move(i));
    cv_.notify_all();
    return *this;
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> items_;
  bool cancelled_ = false;
  bool destroyed_ = false;
  int waiting_ = 0;
};

class FakeWatchStream : public client::WatchStream {
 public:
  explicit FakeWatchStream(std::shared_ptr<WatchScript> s) : script_(std::move(s)) {}
  ~FakeWatchStream() override { script_->mark_destroyed(); }
  client::Result<std::optional<client::WatchEvent>> next() override {
    if (finished_) return client::Error::make(client::Errc::cancelled, "finished");
    auto item = script_->next();
    if (auto* e = std::get_if<client::WatchEvent>(&item))
      return std::optional<client::WatchEvent>(std::move(*e));
    finished_ = true;
    if (auto* err = std::get_if<client::Error>(&item)) return *err;
    return std::optional<client::WatchEvent>();
  }
  void cancel() override { script_->cancel(); }
  [[nodiscard]] std::size_t buffered() const override {
    return finished_ ? 0 : script_->buffered();
  }

 private:
  std::shared_ptr<WatchScript> script_;
  bool finished_ = false;
};

/// Scripted lists and watches; records the options of every call.
class FakeListerWatcher : public client::ListerWatcher {
 public:
  /// Scripts the next list responses (pages or errors), in order.
  void add_list(client::Result<client::ObjectList> r) {
    std::lock_guard lock(mu_);
    lists_.push_back(std::move(r));
  }
  void add_list(std::vector<client::ObjectPtr> items, std::string rv, std::string cont = "") {
    add_list(client::ObjectList{std::move(items), std::move(rv), std::move(cont)});
  }
  /// Scripts the next watch: a stream driven by the returned script.
  std::shared_ptr<WatchScript> add_watch() {
    auto s = std::make_shared<WatchScript>();
    std::lock_guard lock(mu_);
    watches_.emplace_back(s);
    return s;
  }
  /// Scripts the next watch to fail on open.
  void add_watch_error(client::Error e) {
    std::lock_guard lock(mu_);
    watches_.emplace_back(std::move(e));
  }
  /// Response when no list is scripted.
  void set_default_list(std::vector<client::ObjectPtr> items, std::string rv) {
    std::lock_guard lock(mu_);
    default_list_ = client::ObjectList{std::move(items), std::move(rv), ""};
  }

  client::Result<client::ObjectList> list(const client::ListOptions& o) override {
    std::lock_guard lock(mu_);
    list_calls_.push_back(o);
    cv_.notify_all();
    if (lists_.empty()) return default_list_;
    auto r = std::move(lists_.front());
    lists_.pop_front();
    return r;
  }
  client::Result<client::WatchStreamPtr> watch(const client::ListOptions& o) override {
    std::lock_guard lock(mu_);
    watch_calls_.push_back(o);
    cv_.notify_all();
    std::shared_ptr<WatchScript> script;
    if (!watches_.empty()) {
      auto w = std::move(watches_.front());
      watches_.pop_front();
      if (auto* e = std::get_if<client::Error>(&w)) return *e;
      script = std::get<std::shared_ptr<WatchScript>>(w);
    } else {
      script = std::make_shared<WatchScript>();  // open-ended: blocks until cancelled
    }
    opened_.push_back(script);
    return client::WatchStreamPtr(std::make_unique<FakeWatchStream>(script));
  }

  std::vector<client::ListOptions> list_calls() {
    std::lock_guard lock(mu_);
    return list_calls_;
  }
  std::vector<client::ListOptions> watch_calls() {
    std::lock_guard lock(mu_);
    return watch_calls_;
  }
  std::vector<std::shared_ptr<WatchScript>> opened() {
    std::lock_guard lock(mu_);
    return opened_;
  }
  bool wait_watches(std::size_t n) {
    std::unique_lock lock(mu_);
    return wait_until(lock, cv_, [&] { return watch_calls_.size() >= n; });
  }
  bool wait_lists(std::size_t n) {
    std::unique_lock lock(mu_);
    return wait_until(lock, cv_, [&] { return list_calls_.size() >= n; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<client::Result<client::ObjectList>> lists_;
  std::deque<std::variant<client::Error, std::shared_ptr<WatchScript>>> watches_;
  client::ObjectList default_list_{{}, "1", ""};
  std::vector<client::ListOptions> list_calls_;
  std::vector<client::ListOptions> watch_calls_;
  std::vector<std::shared_ptr<WatchScript>> opened_;
};

/// Forwards to a shared FakeListerWatcher (the factory takes ownership of ListerWatchers).
class ListerWatcherProxy : public client::ListerWatcher {
 public:
  explicit ListerWatcherProxy(std::shared_ptr<FakeListerWatcher> f) : f_(std::move(f)) {}
  client::Result<client::ObjectList> list(const client::ListOptions& o) override {
    return f_->list(o);
  }
  client::Result<client::WatchStreamPtr> watch(const client::ListOptions& o) override {
    return f_->watch(o);
  }

 private:
  std::shared_ptr<FakeListerWatcher> f_;
};

/// A clock whose waits return at once, advancing time, and are recorded. Waits of `hold` or
/// longer (default: none) are recorded too but block until advance() passes their end or stop is
/// requested: a watchdog's timer, for example, fires only when the test says so.
class ManualClock : public informer::Clock {
 public:
  explicit ManualClock(Duration hold = Duration::max()) : hold_(hold) {}

  TimePoint now() const override {
    std::lock_guard lock(mu_);
    return now_;
  }
  bool sleep_for(Duration d, std::stop_token stop) override {
    // Registered before taking mu_: a stop requested already runs the callback right here.
    std::stop_callback wake(stop, [this] {
      std::lock_guard l(mu_);
      cv_.notify_all();
    });
    std::unique_lock lock(mu_);
    sleeps_.push_back(d);
    if (d < hold_) {
      now_ += d;
      return !stop.stop_requested();
    }
    TimePoint until = now_ + d;
    ++held_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return stop.stop_requested() || now_ >= until; });
    --held_;
    cv_.notify_all();
    return !stop.stop_requested();
  }
  void advance(Duration d) {
    std::lock_guard lock(mu_);
    now_ += d;
    cv_.notify_all();
  }
  /// Waits until a caller is blocked in a held wait.
  bool wait_held() {
    std::unique_lock lock(mu_);
    return wait_until(lock, cv_, [&] { return held_ > 0; });
  }
  /// Waits until a wait that began after the first `sleeps_before` is held (sleeps().size()
  /// before an advance(): the sleeper has woken and waits again).
  bool wait_held_since(std::size_t sleeps_before) {
    std::unique_lock lock(mu_);
    return wait_until(lock, cv_, [&] { return held_ > 0 && sleeps_.size() > sleeps_before; });
  }
  std::vector<Duration> sleeps() const {
    std::lock_guard lock(mu_);
    return sleeps_;
  }
  /// The recorded waits shorter than `hold` (the ones that returned at once).
  std::vector<Duration> short_sleeps() const {
    std::lock_guard lock(mu_);
    std::vector<Duration> out;
    for (auto d : sleeps_) {
      if (d < hold_) out.push_back(d);
    }
    return out;
  }

 private:
  const Duration hold_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  TimePoint now_{std::chrono::hours(1000)};
  std::vector<Duration> sleeps_;
  int held_ = 0;
};

/// Records every notification as text: "add ns/a 3 initial", "update ns/a 3->4",
/// "delete ns/a 4 unknown".
class RecordingHandler : public informer::ResourceEventHandler {
 public:
  std::function<void(const std::string&)> hook;  // called before recording

  void on_add(const client::ObjectPtr& o, bool initial) override {
    record("add " + o->key() + " " + o->metadata.resource_version + (initial ? " initial" : ""));
  }
  void on_update(const client::ObjectPtr& a, const client::ObjectPtr& b) override {
    record("update " + b->key() + " " + a->metadata.resource_version + "->" +
           b->metadata.resource_version);
  }
  void on_delete(const client::ObjectPtr& o, bool unknown) override {
    record("delete " + o->key() + " " + o->metadata.resource_version + (unknown ? " unknown" : ""));
  }
  std::vector<std::string> events() {
    std::lock_guard lock(mu_);
    return events_;
  }
  bool wait_count(std::size_t n) {
    std::unique_lock lock(mu_);
    return wait_until(lock, cv_, [&] { return events_.size() >= n; });
  }
  bool wait_for(const std::string& e) {
    std::unique_lock lock(mu_);
    return wait_until(lock, cv_, [&] {
      for (const auto& x : events_) {
        if (x == e) return true;
      }
      return false;
    });
  }

 private:
  void record(std::string e) {
    if (hook) hook(e);
    std::lock_guard lock(mu_);
    events_.push_back(std::move(e));
    cv_.notify_all();
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> events_;
};

}  // namespace kinformer::testing
