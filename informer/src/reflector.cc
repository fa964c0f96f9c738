#include "kinformer/informer/reflector.h"

// GCC 12 takes Asio's coroutine frame allocator (its own operator new and delete) for a mismatch
// when it inlines a frame's destruction: a false positive (GCC bug 109224).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

#include <algorithm>
#include <atomic>
#include <exception>
#include <optional>
#include <unordered_map>
#include <utility>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>

#include "detail/await.h"
#include "io_runtime_impl.h"
#include "kinformer/client/error.h"
#include "kinformer/client/pager.h"

namespace kinformer::informer {
namespace {

namespace asio = boost::asio;

double seconds_since(Clock::TimePoint start, Clock& clock) {
  return std::chrono::duration<double>(clock.now() - start).count();
}

bool is_initial_events_end(const client::Object& o) {
  const std::string* v = client::find_value(o.metadata.annotations, kInitialEventsEndAnnotation);
  return v != nullptr && *v == "true";
}

// The resourceVersion asked for cannot be served: too old (410 Expired / Gone) or newer than the
// server's (too large, e.g. after an etcd restore).
bool is_rv_unusable(const client::Error& e) {
  return e.is_expired() || e.is_resource_version_too_large();
}

// The server refuses a WatchList request for its parameters (feature gate off, an old server, a
// policy): a 4xx other than 401, 404, 410 (an RV problem) and 429 (throttling, transient).
// Anything else (network, timeout, truncated or malformed stream, 5xx, 429) is transient:
// retried as WatchList.
bool is_watch_list_refusal(const client::Error& e) {
  // 401 (credentials) and 404 (the resource is gone) are not about WatchList: a LIST would fail
  // the same way, so they are retried with backoff like other failures, not counted as refusals.
  return e.code == client::Errc::api && e.http_status >= 400 && e.http_status < 500 &&
         e.http_status != 401 && e.http_status != 404 && !e.is_too_many_requests() &&
         !is_rv_unusable(e);
}

// Cancels a WatchList stream whose initial events stop coming for `idle`, or have not ended
// within `deadline` of its opening (either limit zero: none). The idle limit is checked once per
// `idle` period: every wait is a whole period (or what is left of the deadline), and a period in
// which the reader touched it starts another one. Shared by the reader and its watchdog
// coroutine, which lives only for the initial-events phase of one stream: the reader disarms it
// on every way out of that phase, before the stream goes.
class InitialEventsWatch {
 public:
  using Duration = Clock::Duration;
  explicit InitialEventsWatch(client::WatchStream& stream) : stream_(&stream) {}

  /// The reader got an event (cheap: one relaxed store).
  void touch() { active_.store(true, std::memory_order_relaxed); }
  /// Stops the watchdog: it will not touch the stream again. False if it already fired (the
  /// stream is cancelled).
  bool disarm() {
    {
      std::lock_guard lock(mu_);
      if (fired_) return false;
      stream_ = nullptr;
    }
    stop_.request_stop();
    return true;
  }
  bool fired() {
    std::lock_guard lock(mu_);
    return fired_;
  }
  /// Which limit fired: the idle one (true) or the deadline.
  bool fired_idle() {
    std::lock_guard lock(mu_);
    return fired_idle_;
  }

  static detail::awaitable<void> watchdog(std::shared_ptr<InitialEventsWatch> self, ClockPtr clock,
                                          Duration idle, Duration deadline) {
    const auto start = clock->now();
    const std::stop_token disarmed = self->stop_.get_token();
    for (;;) {
      Duration wait = idle > Duration::zero() ? idle : Duration::max();
      if (deadline > Duration::zero()) wait = std::min(wait, deadline - (clock->now() - start));
      if (wait > Duration::zero()) {
        const bool slept = co_await detail::sleep_for(clock, wait, disarmed);
        if (!slept) co_return;  // disarmed
      }
      const bool past_deadline = deadline > Duration::zero() && clock->now() - start >= deadline;
      const bool was_idle = idle > Duration::zero() && !self->active_.exchange(false);
      if (!past_deadline && !was_idle) continue;
      std::lock_guard lock(self->mu_);
      if (self->stream_ == nullptr) co_return;  // disarmed meanwhile
      self->fired_ = true;
      self->fired_idle_ = !past_deadline;
      self->stream_->cancel();
      co_return;
    }
  }

 private:
  std::atomic<bool> active_{false};
  std::stop_source stop_;  // disarm() ends the watchdog's wait
  std::mutex mu_;
  client::WatchStream* stream_;  // guarded by mu_; null once disarmed
  bool fired_ = false;           // guarded by mu_
  bool fired_idle_ = false;      // guarded by mu_
};

// Reports an open watch for as long as it lives.
class OpenWatch {
 public:
  explicit OpenWatch(ReflectorMetrics& m) : m_(m) { m_.watch_opened(); }
  ~OpenWatch() { m_.watch_closed(); }
  OpenWatch(const OpenWatch&) = delete;
  OpenWatch& operator=(const OpenWatch&) = delete;

 private:
  ReflectorMetrics& m_;
};

class NullReflectorMetrics final : public ReflectorMetrics {
 public:
  void watch_opened() override {}
  void watch_closed() override {}
  void watch_ended(WatchRestartReason) override {}
  void event(client::EventType) override {}
  void synced(bool, double) override {}
  void backoff_waited() override {}
  void budget_denied() override {}
  void watch_list_fell_back(WatchListFallback) override {}
};

}  // namespace

struct Reflector::Loop {
  static detail::awaitable<void> run(Reflector& r, std::stop_token stop);
  // (Arguments by reference to the caller's named values: no temporary spans a co_await, which
  // GCC 12 mishandles.)
  static detail::awaitable<WatchOutcome> watch(Reflector& r, const client::ListOptions& opts,
                                               Phase phase, const std::stop_token& stop);
  // Waits as `next` says; false when stopped.
  static detail::awaitable<bool> wait(Reflector& r, const Next& next, const std::stop_token& stop);
  // Said when the blocking pool cannot start a thread for a call (which is tried again).
  static std::function<void()> pool_refused(Reflector& r) {
    return [&r] {
      r.log_.warn(
          "no thread could be started for a blocking call (a thread or memory limit?); trying "
          "again until one starts");
    };
  }
};

ReflectorMetrics& ReflectorMetrics::null() {
  static NullReflectorMetrics metrics;
  return metrics;
}

Reflector::Reflector(client::ListerWatcher& lister_watcher, ReflectorSink& sink,
                     ReflectorOptions options)
    : lw_(lister_watcher),
      sink_(sink),
      options_(std::move(options)),
      metrics_(options_.metrics != nullptr ? *options_.metrics : ReflectorMetrics::null()),
      log_(options_.log.with("reflector",
                             options_.name.empty()
                                 ? std::vector<client::LogField>{}
                                 : std::vector<client::LogField>{{"informer", options_.name}})) {
  if (!options_.clock || !options_.random) {
    throw client::ConfigError(
        "Reflector " + options_.name +
        ": ReflectorOptions::clock and ::random are required (InformerFactory sets them)");
  }
  backoff_ = options_.make_backoff ? options_.make_backoff()
                                   : std::make_unique<JitteredExponentialBackoff>(
                                         options_.backoff, options_.clock, options_.random);
  if (!backoff_) {
    throw client::ConfigError("Reflector " + options_.name +
                              ": ReflectorOptions::make_backoff returned null");
  }
}

std::string Reflector::last_sync_resource_version() const { return rv(); }

bool Reflector::watch_list_fell_back() const {
  std::lock_guard lock(mu_);
  return watch_list_fell_back_;
}

std::string Reflector::rv() const {
  std::lock_guard lock(mu_);
  return last_rv_;
}

void Reflector::set_rv(const std::string& rv) {
  if (rv.empty()) return;
  std::lock_guard lock(mu_);
  last_rv_ = rv;
}

void Reflector::set_watch_list_fell_back(bool fell_back) {
  std::lock_guard lock(mu_);
  watch_list_fell_back_ = fell_back;
}

client::ListOptions Reflector::base_options() const {
  client::ListOptions o;
  o.label_selector = options_.label_selector;
  o.field_selector = options_.field_selector;
  return o;
}

int Reflector::random_timeout_seconds() {
  int t = 300 + static_cast<int>(options_.random() * 300.0);
  return std::clamp(t, 300, 599);
}

bool Reflector::set_stream(client::WatchStream* stream, const std::stop_token& stop) {
  std::lock_guard lock(mu_);
  current_ = stream;
  if (stream != nullptr && stop.stop_requested()) {
    stream->cancel();
    return false;
  }
  return true;
}

Clock::Duration Reflector::wait_for(const Next& next) {
  const client::Error* error = next.error ? &*next.error : nullptr;
  Clock::Duration wait = next.wait == Wait::backoff ? backoff_->next() : Clock::Duration::zero();
  if (error != nullptr && error->retry_after) {
    wait = std::max<Clock::Duration>(wait, *error->retry_after);
  }
  if (options_.budget) {
    auto budget_wait = options_.budget->reserve();
    if (budget_wait > Clock::Duration::zero()) {
      metrics_.budget_denied();
      wait = std::max(wait, budget_wait);
    }
  }
  return wait;
}

Clock::Duration Reflector::time_until_stale() const {
  if (stale_reported_ || !contacted_.load(std::memory_order_acquire)) {
    return Clock::Duration::zero();
  }
  const Clock::TimePoint last(Clock::Duration(last_contact_.load(std::memory_order_relaxed)));
  // Stale is "older than stale_after": one millisecond past it.
  const Clock::TimePoint stale_at = last + idle_deadline() + std::chrono::milliseconds(1);
  return std::max(Clock::Duration::zero(), stale_at - options_.clock->now());
}

void Reflector::synced(const std::string& resource_version, std::vector<client::ObjectPtr> items,
                       Clock::TimePoint started) {
  rv_unavailable_ = false;
  touch();
  resyncing_ = false;
  // The RV first: on_replace publishes "synced", and a waiter woken by it reads the RV.
  set_rv(resource_version);
  sink_.on_replace(std::move(items), resource_version);
  metrics_.synced(!listed_once_, seconds_since(started, *options_.clock));
  listed_once_ = true;
}

client::ListOptions Reflector::list_options() const {
  client::ListOptions opts = base_options();
  std::string last = rv();
  if (rv_unavailable_ || (last.empty() && list_at_zero_too_large_)) {
    opts.resource_version.reset();  // consistent read
  } else {
    opts.resource_version = last.empty() ? "0" : last;
    // A resourceVersion other than "0" together with a limit means Exact to the API server: it
    // would list the old state at that revision (from etcd), and after a restart the watch from
    // it is 410 again, round after round. NotOlderThan lists the current state (from the watch
    // cache), which is what a relist wants.
    if (!last.empty()) opts.resource_version_match = "NotOlderThan";
  }
  opts.limit = options_.page_size;
  return opts;
}

std::string_view to_string(Freshness::State state) noexcept {
  switch (state) {
    case Freshness::State::fresh:
      return "fresh";
    case Freshness::State::stale:
      return "stale";
    case Freshness::State::resyncing:
      return "resyncing";
  }
  return "unknown";
}

Freshness stalest(Freshness a, const Freshness& b) {
  auto rank = [](Freshness::State s) {
    return s == Freshness::State::stale ? 2 : s == Freshness::State::resyncing ? 1 : 0;
  };
  if (rank(b.state) > rank(a.state)) a.state = b.state;
  if (!b.last_contact || (a.last_contact && *b.last_contact < *a.last_contact)) {
    a.last_contact = b.last_contact;
  }
  a.age = std::max(a.age, b.age);
  a.stale_after = std::max(a.stale_after, b.stale_after);
  return a;
}

void Reflector::touch() {
  last_contact_.store(options_.clock->now().time_since_epoch().count(), std::memory_order_relaxed);
  contacted_.store(true, std::memory_order_release);
  metrics_.contacted();
  if (stale_reported_) {
    stale_reported_ = false;
    metrics_.stale(false);
  }
}

void Reflector::report_stale(bool cut_idle) {
  if (stale_reported_) return;
  if (cut_idle || freshness().state == Freshness::State::stale) {
    stale_reported_ = true;
    metrics_.stale(true);
  }
}

std::chrono::milliseconds Reflector::new_watch_idle_timeout() const {
  return expect_bookmarks_.load() ? options_.watch_idle_timeout : std::chrono::milliseconds::zero();
}

std::chrono::milliseconds Reflector::idle_deadline() const {
  const auto asked = new_watch_idle_timeout();
  // 0: the client's, timeoutSeconds (at most 599 here) + 60 s.
  return asked > std::chrono::milliseconds::zero() ? asked : std::chrono::seconds(599 + 60);
}

Freshness Reflector::freshness() const {
  Freshness f;
  f.resource_version = rv();
  f.stale_after = idle_deadline();
  if (contacted_.load(std::memory_order_acquire)) {
    const Clock::Duration::rep ticks = last_contact_.load(std::memory_order_relaxed);
    f.last_contact = Clock::TimePoint(Clock::Duration(ticks));
    f.age = std::max(Clock::Duration::zero(), options_.clock->now() - *f.last_contact);
  }
  // Stale wins: a resync that keeps failing must not hide how old the cache is.
  if (f.last_contact && f.age > f.stale_after) {
    f.state = Freshness::State::stale;
  } else {
    f.state = resyncing_.load() ? Freshness::State::resyncing : Freshness::State::fresh;
  }
  return f;
}

client::ListOptions Reflector::watch_list_options() {
  client::ListOptions opts = base_options();
  std::string last = rv();
  if (!rv_unavailable_ && !last.empty()) opts.resource_version = last;
  opts.resource_version_match = "NotOlderThan";
  opts.send_initial_events = true;
  opts.allow_watch_bookmarks = true;
  opts.timeout_seconds = random_timeout_seconds();
  opts.idle_timeout = new_watch_idle_timeout();
  return opts;
}

client::ListOptions Reflector::rewatch_options() {
  client::ListOptions opts = base_options();
  opts.resource_version = rv();
  opts.allow_watch_bookmarks = true;
  opts.timeout_seconds = random_timeout_seconds();
  opts.idle_timeout = new_watch_idle_timeout();
  return opts;
}

client::Status Reflector::list_and_replace(std::stop_token stop) {
  auto start = options_.clock->now();
  client::ListPagerOptions paging;
  // An expired continue token is a 410 like any other on a list: returned, so that the next
  // sync relists at an unset resourceVersion after backoff and a budget token (after_list).
  paging.restarts_on_expired_continue = 0;
  paging.restart = [this](const client::Error& e,
                          const client::ListOptions& page) -> std::optional<client::ListOptions> {
    if (e.code == client::Errc::too_large && page.continue_token.empty() &&
        page.resource_version == "0") {
      // RV "0" is served from the watch cache, which (on many servers) ignores limit: the
      // whole list comes in one response, and it will be too large every time. A consistent
      // read with limit is paginated (by etcd); every list at "0" from now on is one.
      log_.warn("list at resourceVersion 0 too large, falling back to a paginated consistent list",
                {{"error", e.to_string()}});
      list_at_zero_too_large_ = true;
      return list_options();
    }
    return std::nullopt;
  };
  client::ListPager pager(
      [&](const client::ListOptions& page) -> client::Result<client::ObjectList> {
        if (stop.stop_requested()) return client::Error::make(client::Errc::cancelled, "stopped");
        client::ListOptions opts = page;
        opts.stop = stop;  // stop() does not wait for the client's rate limiter
        auto listed = lw_.list(opts);
        if (listed) touch();  // a long relist is contact, page by page
        return listed;
      },
      std::move(paging));
  auto list = pager.list(list_options());
  if (!list) {
    client::Error e = std::move(list).error();
    if (e.is_resource_version_too_large()) rv_unavailable_ = true;  // the server is behind us
    if (e.is_expired()) rv_unavailable_ = true;  // expired RV or continue token: from scratch
    return e;
  }
  synced(list.value().resource_version, std::move(list.value().items), start);
  return client::Ok{};
}

detail::awaitable<Reflector::WatchOutcome> Reflector::Loop::watch(Reflector& r,
                                                                  const client::ListOptions& opts,
                                                                  Phase phase,
                                                                  const std::stop_token& stop) {
  WatchOutcome out;
  out.phase = phase;
  auto fail = [&](client::Error e) {
    // A cancellation that stop() did not ask for is a failure like any other: retried.
    if (stop.stop_requested()) {
      out.end = WatchRestartReason::shutdown;
    } else {
      out.end = is_rv_unusable(e) ? WatchRestartReason::expired : WatchRestartReason::error;
    }
    out.error = std::move(e);
    return out;
  };
  auto start = r.options_.clock->now();
  auto open_watch = [&r, &opts] { return r.lw_.watch(opts); };
  const std::function<void()> refused = pool_refused(r);
  auto opened =
      co_await detail::on_pool(open_watch, stop, detail::BlockingPool::instance(), &refused);
  if (!opened) co_return fail(std::move(opened).error());
  client::WatchStreamPtr stream = std::move(opened).value();
  // The server answered; after an idle cut only data counts (a path that passes response
  // headers and then stalls must not look fresh at every reopening).
  const bool resumed_after_idle = std::exchange(r.resuming_after_idle_, false);
  if (!resumed_after_idle) r.touch();
  const auto opened_at = r.options_.clock->now();
  OpenWatch open(r.metrics_);
  struct Detach {  // the stream is not cancellable by stop() once it is gone
    Reflector* r;
    std::stop_token stop;
    ~Detach() { r->set_stream(nullptr, stop); }
  } detach{&r, stop};
  if (!r.set_stream(stream.get(), stop)) {
    out.end = WatchRestartReason::shutdown;
    co_return out;
  }
  // The initial-events phase: the events build the new state, and the bookmark that ends them
  // replaces the sink's contents with it. Then the same stream goes on in the steady phase.
  std::unordered_map<std::string, client::ObjectPtr> initial;
  std::shared_ptr<InitialEventsWatch> timer;
  struct Disarm {  // the watchdog never touches the stream once this frame lets go of it
    std::shared_ptr<InitialEventsWatch>& timer;
    ~Disarm() {
      if (timer) timer->disarm();
    }
  } disarm{timer};
  if (phase == Phase::initial_events &&
      (r.options_.watch_list_initial_events_timeout > std::chrono::milliseconds::zero() ||
       r.options_.watch_list_initial_events_deadline > std::chrono::milliseconds::zero())) {
    timer = std::make_shared<InitialEventsWatch>(*stream);
    auto ex = co_await asio::this_coro::executor;
    asio::co_spawn(ex,
                   InitialEventsWatch::watchdog(timer, r.options_.clock,
                                                r.options_.watch_list_initial_events_timeout,
                                                r.options_.watch_list_initial_events_deadline),
                   [](const std::exception_ptr& e) {
                     // As the loop's: what it does not handle ends the process (a watchdog that
                     // vanished would leave a sync without its limits).
                     if (!detail::ended_by_stop(e)) std::rethrow_exception(e);
                   });
  }
  bool delivered = false;
  bool bookmark_in_stream = false;
  // Steady-phase events the stream had already received go to the sink together (the informer
  // applies them in parts bounded by its handler count: SharedInformer::kMaxHandOff); the RV
  // follows the last one handed over.
  std::vector<client::WatchEvent> pending;
  std::string pending_rv;
  auto flush = [&] {
    if (pending.empty()) return;
    r.sink_.on_events(pending);
    pending.clear();
    r.set_rv(pending_rv);
    pending_rv.clear();
  };
  for (;;) {
    // Before anything that can block: hand over what is held once the stream has nothing more
    // (every path through the loop, `continue` included, comes back here).
    if (!pending.empty() && (pending.size() >= kMaxEventBatch || stream->buffered() == 0)) {
      flush();
    }
    auto next = co_await detail::next_event(*stream, stop);
    if (!next || !next.value().has_value()) {
      flush();  // usually empty: held only while the stream had more buffered (then cancelled)
      bool timer_fired = timer && timer->fired();
      if (stop.stop_requested()) {
        out.end = WatchRestartReason::shutdown;
      } else if (timer_fired) {
        out.end = WatchRestartReason::initial_events_timeout;  // the timer cancelled the stream
        out.idle = timer->fired_idle();
      } else if (!next && next.error().code == client::Errc::timeout) {
        // The client's read-idle deadline: no byte for that long (the stream is open, so this is
        // not a connect or request timeout). In the initial-events phase, a missing end bookmark
        // like the initial-events timer's: fall back to LIST.
        out.end = out.phase == Phase::initial_events ? WatchRestartReason::initial_events_timeout
                                                     : WatchRestartReason::idle;
        out.idle = true;
        out.error = std::move(next).error();
      } else if (!next) {
        co_return fail(std::move(next).error());
      } else if (out.phase == Phase::initial_events) {
        out.end =
            WatchRestartReason::no_initial_events_end;  // the server ignores sendInitialEvents
      } else if (!delivered &&
                 r.options_.clock->now() - opened_at < r.options_.min_watch_duration) {
        out.end = WatchRestartReason::too_short;
      } else {
        out.end = WatchRestartReason::timeout;
      }
      co_return out;
    }
    client::WatchEvent& ev = *next.value();
    if (timer) timer->touch();
    r.touch();
    // A watch resumed after an idle cut that delivers an event at once was handed what the
    // silent one had not delivered: that path was dead, not the server quiet.
    if (resumed_after_idle && ev.type != client::EventType::bookmark &&
        r.options_.clock->now() - opened_at <= kReplayWindow) {
      r.idle_cuts_without_bookmark_ = 0;
    }
    // A periodic bookmark (not a WatchList's initial-events-end one, which a server sends also
    // where it sends no periodic ones, e.g. a resource served from etcd): the server sends them
    // here, so silence past watch_idle_timeout is a dead path, on this stream too (it may have
    // been opened with the client's longer deadline).
    if (ev.type == client::EventType::bookmark && !bookmark_in_stream &&
        out.phase == Phase::steady && ev.object && !is_initial_events_end(*ev.object)) {
      bookmark_in_stream = true;
      r.idle_cuts_without_bookmark_ = 0;
      if (!r.expect_bookmarks_.exchange(true) &&
          r.options_.watch_idle_timeout > std::chrono::milliseconds::zero()) {
        stream->set_idle_timeout(r.options_.watch_idle_timeout);
      }
    }
    if (!ev.object) continue;
    delivered = true;
    std::string ev_rv = ev.object->metadata.resource_version;
    if (ev.type == client::EventType::bookmark || out.phase == Phase::steady) {
      r.metrics_.event(ev.type);
    }
    if (out.phase == Phase::initial_events) {
      if (ev.type != client::EventType::bookmark) {
        if (ev.type == client::EventType::deleted) {
          initial.erase(ev.object->key());
        } else {
          initial[ev.object->key()] = std::move(ev.object);
        }
      } else if (is_initial_events_end(*ev.object)) {
        if (timer && !timer->disarm()) {
          // It fired meanwhile: the stream is cancelled.
          out.end = WatchRestartReason::initial_events_timeout;
          out.idle = timer->fired_idle();
          co_return out;
        }
        timer = nullptr;
        std::vector<client::ObjectPtr> items;
        items.reserve(initial.size());
        for (auto& [key, o] : initial) items.push_back(std::move(o));
        initial.clear();
        r.set_watch_list_fell_back(false);
        r.synced(ev_rv, std::move(items), start);
        out.phase = Phase::steady;
      }
      continue;
    }
    if (ev.type == client::EventType::bookmark) {
      flush();
      r.sink_.on_resource_version(ev_rv);
      r.set_rv(ev_rv);
      continue;
    }
    pending.push_back(std::move(ev));
    if (!ev_rv.empty()) pending_rv = std::move(ev_rv);  // as set_rv: an empty RV changes nothing
  }
}

Reflector::Next Reflector::after_list(client::Status status, const std::stop_token& stop) {
  if (stop.stop_requested()) return {Step::stop};
  if (status.ok()) return {Step::watch};
  log_.warn("list failed", {{"error", status.error().to_string()}});
  return {Step::sync, Wait::backoff, std::move(status).error()};
}

Reflector::Next Reflector::fall_back_to_list(const std::string& why, WatchListFallback reason) {
  log_.warn("WatchList failed, falling back to LIST for this sync", {{"reason", why}});
  set_watch_list_fell_back(true);
  metrics_.watch_list_fell_back(reason);
  return {Step::list};
}

Reflector::Next Reflector::after_watch(WatchOutcome out) {
  if (out.phase == Phase::initial_events) {
    // A WatchList sync attempt that did not complete.
    switch (out.end) {
      case WatchRestartReason::shutdown:
        return {Step::stop};
      case WatchRestartReason::initial_events_timeout:
        return fall_back_to_list(
            "no " + std::string(kInitialEventsEndAnnotation) + " bookmark: " +
                (out.idle
                     ? "no event for " +
                           std::to_string(options_.watch_list_initial_events_timeout.count())
                     : "not within " +
                           std::to_string(options_.watch_list_initial_events_deadline.count())) +
                " ms",
            WatchListFallback::initial_events_timeout);
      case WatchRestartReason::no_initial_events_end:
        return fall_back_to_list("stream ended before the initial-events-end bookmark",
                                 WatchListFallback::refused);
      default:
        break;
    }
    client::Error& e = out.error;
    if (is_rv_unusable(e)) rv_unavailable_ = true;
    if (is_watch_list_refusal(e)) {
      return fall_back_to_list(e.to_string(), WatchListFallback::refused);
    }
    // Transient: back off and retry as a WatchList.
    log_.warn("WatchList failed, retrying as WatchList", {{"error", e.to_string()}});
    return {Step::sync, Wait::backoff, std::move(e)};
  }
  metrics_.watch_ended(out.end);
  switch (out.end) {
    case WatchRestartReason::shutdown:
      return {Step::stop};
    case WatchRestartReason::timeout:
      // Rewatch from the last RV without relisting; reconnects still spend budget.
      return {Step::watch, Wait::budget};
    case WatchRestartReason::idle:
      // A silent path (a dead NAT entry, a stalled proxy): a new connection, from the last RV.
      log_.warn("watch idle: nothing from the server within the idle deadline, resuming",
                {{"rv", rv()}, {"error", out.error.to_string()}});
      report_stale(/*cut_idle=*/true);  // silent for the deadline: stale until the next contact
      // Three watches that opened (the server answered) and then went silent, with no periodic
      // bookmark since and no resumed watch replaying missed events at once: the server sends
      // no bookmarks here (a resource served from etcd), quiet is not dead. Back to the client's
      // deadline until a periodic bookmark comes.
      resuming_after_idle_ = true;
      if (++idle_cuts_without_bookmark_ >= 3 && expect_bookmarks_.exchange(false)) {
        log_.warn("no bookmark from the server within three idle deadlines; using the client's");
      }
      return {Step::watch, Wait::budget};
    case WatchRestartReason::too_short:
      // client-go's "very short watch": a server or proxy that closes watches at once would
      // otherwise be rewatched at the budget's full rate forever. Back off, then relist.
      log_.warn("watch ended at once without events, backing off and relisting", {{"rv", rv()}});
      return {Step::sync, Wait::backoff};
    default:
      break;
  }
  client::Error& e = out.error;
  if (e.is_expired()) {
    log_.info("watch expired, relisting", {{"rv", rv()}});
    return {Step::sync, Wait::budget};  // at the last synced RV; a 410 on that list goes to ""
  }
  if (e.is_resource_version_too_large()) {
    log_.warn("resource version too large, relisting at an unset resourceVersion", {{"rv", rv()}});
    rv_unavailable_ = true;                           // the server is behind our RV: relist at ""
    return {Step::sync, Wait::budget, std::move(e)};  // after its Retry-After (1 s for this one)
  }
  log_.warn("watch failed, rewatching", {{"rv", rv()}, {"error", e.to_string()}});
  return {Step::watch, Wait::backoff, std::move(e)};
}

detail::awaitable<bool> Reflector::Loop::wait(Reflector& r, const Next& next,
                                              const std::stop_token& stop) {
  r.report_stale(false);
  if (next.wait == Wait::none) co_return !stop.stop_requested();
  Clock::Duration wait = r.wait_for(next);
  if (wait <= Clock::Duration::zero()) co_return !stop.stop_requested();
  r.metrics_.backoff_waited();
  // The view may turn stale during the wait: say so then, not after it.
  const Clock::Duration until_stale = r.time_until_stale();
  if (until_stale > Clock::Duration::zero() && until_stale < wait) {
    const bool slept = co_await detail::sleep_for(r.options_.clock, until_stale, stop);
    if (!slept) co_return false;
    r.report_stale(false);
    wait -= until_stale;
  }
  const bool slept = co_await detail::sleep_for(r.options_.clock, wait, stop);
  co_return slept;
}

detail::awaitable<void> Reflector::Loop::run(Reflector& r, std::stop_token stop) {
  std::stop_callback on_stop(stop, [&r] {
    std::lock_guard lock(r.mu_);
    if (r.current_ != nullptr) r.current_->cancel();
  });
  auto list = [&r, &stop] { return r.list_and_replace(stop); };
  const std::function<void()> refused = pool_refused(r);
  // The first sync needs no wait. Every later request waits as its Next says: a relist or a
  // reconnect spends a budget token, a failure backs off first.
  // (Every co_await is a statement of its own, on named values: GCC 12 mishandles temporaries
  // in a co_await's enclosing expression.)
  Next next{Step::sync};
  for (;;) {
    if (next.step == Step::stop) co_return;
    const bool waited = co_await wait(r, next, stop);
    if (!waited) co_return;
    if (next.step == Step::sync) r.resyncing_ = true;
    if (next.step == Step::list || (next.step == Step::sync && !r.options_.use_watch_list)) {
      client::Status listed =
          co_await detail::on_pool(list, stop, detail::BlockingPool::instance(), &refused);
      next = r.after_list(std::move(listed), stop);
    } else {
      // A sync attempt starts as a WatchList (a refusal falls back to LIST for that attempt).
      const Phase phase = next.step == Step::sync ? Phase::initial_events : Phase::steady;
      client::ListOptions opts =
          phase == Phase::initial_events ? r.watch_list_options() : r.rewatch_options();
      WatchOutcome out = co_await watch(r, opts, phase, stop);
      next = r.after_watch(std::move(out));
    }
  }
}

void Reflector::run(const std::stop_token& stop) {
  asio::io_context ioc(1);
  std::exception_ptr failure;
  asio::co_spawn(asio::make_strand(ioc), Loop::run(*this, stop),
                 [&failure](const std::exception_ptr& e) { failure = e; });
  ioc.run();
  if (!detail::ended_by_stop(failure)) std::rethrow_exception(failure);
}

void Reflector::start(client::IoRuntime& runtime, std::stop_token stop,
                      std::function<void()> done) {
  asio::co_spawn(asio::make_strand(runtime.impl().ioc), Loop::run(*this, std::move(stop)),
                 [done = std::move(done)](const std::exception_ptr& e) {
                   // As on a thread of its own: what the loop does not handle ends the process.
                   if (!detail::ended_by_stop(e)) std::rethrow_exception(e);
                   if (done) done();
                 });
}

}  // namespace kinformer::informer
