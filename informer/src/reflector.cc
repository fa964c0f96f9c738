#include "kinformer/informer/reflector.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <thread>
#include <unordered_map>

#include "kinformer/informer/metrics.h"

namespace kinformer::informer {
namespace {

void log(const char* level, const std::string& msg) {
  std::fprintf(stderr, "level=%s component=reflector %s\n", level, msg.c_str());
}

double seconds_since(Clock::TimePoint start, Clock& clock) {
  return std::chrono::duration<double>(clock.now() - start).count();
}

bool is_initial_events_end(const client::Object& o) {
  const std::string* v = client::find_value(o.metadata.annotations, kInitialEventsEndAnnotation);
  return v != nullptr && *v == "true";
}

// The resourceVersion asked for cannot be served: too old (410 Expired / Gone) or newer than the
// server's (too large, e.g. after an etcd restore).
bool is_rv_unusable(const client::Error& e) { return e.is_expired() || e.is_resource_version_too_large(); }

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

// Cancels a WatchList stream whose initial events have not ended within `timeout` of `clock`, on
// its own thread (the reflector's thread is blocked reading the stream). The thread lives only
// for the initial-events phase of one sync attempt: destruction stops and joins it.
class InitialEventsTimer {
 public:
  InitialEventsTimer(Clock& clock, Clock::Duration timeout, client::WatchStream& stream)
      : thread_([this, &clock, timeout, &stream](std::stop_token stop) {
          if (!clock.sleep_for(timeout, stop)) return;
          std::lock_guard lock(mu_);
          if (disarmed_) return;
          fired_ = true;
          stream.cancel();
        }) {}
  InitialEventsTimer(const InitialEventsTimer&) = delete;
  InitialEventsTimer& operator=(const InitialEventsTimer&) = delete;

  /// Stops the timer from firing. False if it already fired (the stream is cancelled).
  bool disarm() {
    std::lock_guard lock(mu_);
    if (!fired_) disarmed_ = true;
    return !fired_;
  }
  bool fired() {
    std::lock_guard lock(mu_);
    return fired_;
  }

 private:
  std::mutex mu_;
  bool disarmed_ = false;  // guarded by mu_
  bool fired_ = false;     // guarded by mu_
  std::jthread thread_;    // last: starts after, and is joined before, the fields above go
};

}  // namespace

Reflector::Reflector(client::ListerWatcher& lister_watcher, ReflectorSink& sink, ReflectorOptions options)
    : lw_(lister_watcher),
      sink_(sink),
      options_(std::move(options)),
      backoff_(options_.backoff, options_.clock ? options_.clock : system_clock(),
               options_.random ? options_.random : default_random()) {
  if (!options_.clock) options_.clock = system_clock();
  if (!options_.random) options_.random = default_random();
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

bool Reflector::set_stream(client::WatchStream* stream, std::stop_token stop) {
  std::lock_guard lock(mu_);
  current_ = stream;
  if (stream != nullptr && stop.stop_requested()) {
    stream->cancel();
    return false;
  }
  return true;
}

bool Reflector::wait_retry(const client::Error* error, bool with_backoff, std::stop_token stop) {
  Clock::Duration wait = with_backoff ? backoff_.next() : Clock::Duration::zero();
  if (error != nullptr && error->retry_after) {
    wait = std::max<Clock::Duration>(wait, *error->retry_after);
  }
  if (options_.budget) {
    auto budget_wait = options_.budget->reserve();
    if (budget_wait > Clock::Duration::zero()) {
      if (options_.metrics) options_.metrics->budget_denials.Increment();
      wait = std::max(wait, budget_wait);
    }
  }
  if (wait > Clock::Duration::zero()) {
    if (options_.metrics) options_.metrics->backoff_waits.Increment();
    return options_.clock->sleep_for(wait, stop);
  }
  return !stop.stop_requested();
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

client::Status Reflector::list_and_replace(std::stop_token stop) {
  auto start = options_.clock->now();
  client::ListOptions opts = list_options();
  std::vector<client::ObjectPtr> items;
  std::string list_rv;
  for (;;) {
    if (stop.stop_requested()) return client::Error::make(client::Errc::cancelled, "stopped");
    opts.stop = stop;  // stop() does not wait for the client's rate limiter
    auto page = lw_.list(opts);
    if (!page) {
      client::Error e = std::move(page).error();
      if (e.is_resource_version_too_large()) rv_unavailable_ = true;  // the server is behind us
      if (e.is_expired()) rv_unavailable_ = true;  // expired RV or continue token: from scratch
      if (e.code == client::Errc::too_large && opts.continue_token.empty() && opts.resource_version == "0") {
        // RV "0" is served from the watch cache, which (on many servers) ignores limit: the
        // whole list comes in one response, and it will be too large every time. A consistent
        // read with limit is paginated (by etcd); every list at "0" from now on is one.
        log("warn", "msg=\"list at resourceVersion 0 too large, falling back to a paginated consistent list\" "
                    "error=\"" + e.to_string() + "\"");
        list_at_zero_too_large_ = true;
        opts = list_options();
        continue;
      }
      return e;
    }
    auto& list = page.value();
    if (items.empty()) {
      items = std::move(list.items);
    } else {
      items.insert(items.end(), std::make_move_iterator(list.items.begin()),
                   std::make_move_iterator(list.items.end()));
    }
    list_rv = list.resource_version;
    if (list.continue_token.empty()) break;
    opts.continue_token = list.continue_token;
    // A resourceVersion or resourceVersionMatch together with continue is a 400.
    opts.resource_version.reset();
    opts.resource_version_match.clear();
  }
  rv_unavailable_ = false;
  // The RV first: on_replace publishes "synced", and a waiter woken by it reads the RV.
  set_rv(list_rv);
  sink_.on_replace(std::move(items), list_rv);
  if (options_.metrics) {
    (listed_once_ ? options_.metrics->relists : options_.metrics->initial_lists).Increment();
    options_.metrics->list_duration.Observe(seconds_since(start, *options_.clock));
  }
  listed_once_ = true;
  return client::Ok{};
}

void Reflector::set_watch_list_fell_back(bool fell_back) {
  std::lock_guard lock(mu_);
  watch_list_fell_back_ = fell_back;
}

client::Status Reflector::watch_list_sync(std::stop_token stop) {
  auto start = options_.clock->now();
  client::ListOptions opts = base_options();
  std::string last = rv();
  if (!rv_unavailable_ && !last.empty()) opts.resource_version = last;
  opts.resource_version_match = "NotOlderThan";
  opts.send_initial_events = true;
  opts.allow_watch_bookmarks = true;
  opts.timeout_seconds = random_timeout_seconds();
  // For this sync only: the next one tries WatchList again.
  auto fall_back = [&](const std::string& why, prometheus::Counter* counter) {
    log("warn", "msg=\"WatchList failed, falling back to LIST for this sync\" reason=\"" + why + "\"");
    set_watch_list_fell_back(true);
    if (counter != nullptr) counter->Increment();
    return list_and_replace(stop);
  };
  InformerMetrics* m = options_.metrics;
  // A failure that is not a refusal is returned: the caller backs off and retries a WatchList.
  auto failed = [&](client::Error e) -> client::Status {
    if (is_rv_unusable(e)) rv_unavailable_ = true;
    if (is_watch_list_refusal(e)) return fall_back(e.to_string(), m ? &m->watch_list_fallbacks_refused : nullptr);
    return e;
  };
  auto opened = lw_.watch(opts);
  if (!opened) return failed(std::move(opened).error());
  client::WatchStreamPtr stream = std::move(opened).value();
  if (m) {
    m->watch_starts.Increment();
    m->open_watches.Increment();
  }
  struct OpenGuard {
    InformerMetrics* m;
    ~OpenGuard() {
      if (m) m->open_watches.Decrement();
    }
  };
  std::unordered_map<std::string, client::ObjectPtr> state;
  {
    OpenGuard guard{m};
    if (!set_stream(stream.get(), stop)) {
      set_stream(nullptr, stop);
      return client::Error::make(client::Errc::cancelled, "stopped");
    }
    std::optional<InitialEventsTimer> timer;
    if (options_.watch_list_initial_events_timeout > std::chrono::milliseconds::zero()) {
      timer.emplace(*options_.clock, options_.watch_list_initial_events_timeout, *stream);
    }
    auto timed_out = [&] {
      set_stream(nullptr, stop);  // the timer is gone by now
      return fall_back("no " + std::string(kInitialEventsEndAnnotation) + " bookmark within " +
                           std::to_string(options_.watch_list_initial_events_timeout.count()) + " ms",
                       m ? &m->watch_list_fallbacks_timeout : nullptr);
    };
    for (;;) {
      auto next = stream->next();
      if (!next || !next.value().has_value()) {
        set_stream(nullptr, stop);
        bool fired = timer && timer->fired();
        timer.reset();  // stopped and joined before any fallback LIST
        if (stop.stop_requested()) return client::Error::make(client::Errc::cancelled, "stopped");
        if (fired) return timed_out();
        if (next) {
          // A clean end before the bookmark: the server does not honour sendInitialEvents.
          return fall_back("stream ended before the initial-events-end bookmark",
                           m ? &m->watch_list_fallbacks_refused : nullptr);
        }
        return failed(std::move(next).error());
      }
      client::WatchEvent& ev = *next.value();
      if (!ev.object) continue;
      if (ev.type == client::EventType::bookmark) {
        if (m) m->events_bookmark.Increment();
        if (is_initial_events_end(*ev.object)) {
          bool cancelled_by_timer = timer && !timer->disarm();
          timer.reset();
          if (cancelled_by_timer) return timed_out();  // the stream was cancelled meanwhile
          std::string bookmark_rv = ev.object->metadata.resource_version;
          std::vector<client::ObjectPtr> items;
          items.reserve(state.size());
          for (auto& [k, o] : state) items.push_back(std::move(o));
          rv_unavailable_ = false;
          set_watch_list_fell_back(false);
          set_rv(bookmark_rv);  // before on_replace publishes "synced"
          sink_.on_replace(std::move(items), bookmark_rv);
          if (m) {
            (listed_once_ ? m->relists : m->initial_lists).Increment();
            m->list_duration.Observe(seconds_since(start, *options_.clock));
          }
          listed_once_ = true;
          break;
        }
        continue;
      }
      if (ev.type == client::EventType::deleted) {
        state.erase(ev.object->key());
      } else {
        state[ev.object->key()] = std::move(ev.object);
      }
    }
    set_stream(nullptr, stop);
  }
  pending_stream_ = std::move(stream);  // keep watching on the same stream
  return client::Ok{};
}

Reflector::WatchOutcome Reflector::consume(client::WatchStream& stream, std::stop_token stop,
                                           Clock::TimePoint opened, bool delivered) {
  WatchOutcome out;
  if (!set_stream(&stream, stop)) {
    set_stream(nullptr, stop);
    out.end = WatchEnd::stopped;
    return out;
  }
  if (options_.metrics) options_.metrics->open_watches.Increment();
  for (;;) {
    auto next = stream.next();
    if (!next) {
      out.error = std::move(next).error();
      if (stop.stop_requested() || out.error.code == client::Errc::cancelled) {
        out.end = WatchEnd::stopped;
      } else if (out.error.is_expired()) {
        out.end = WatchEnd::expired;
      } else if (out.error.is_resource_version_too_large()) {
        out.end = WatchEnd::rv_too_large;
      } else {
        out.end = WatchEnd::error;
      }
      break;
    }
    if (!next.value().has_value()) {
      if (stop.stop_requested()) {
        out.end = WatchEnd::stopped;
      } else if (!delivered && options_.clock->now() - opened < options_.min_watch_duration) {
        out.end = WatchEnd::too_short;
      } else {
        out.end = WatchEnd::clean;
      }
      break;
    }
    client::WatchEvent& ev = *next.value();
    if (!ev.object) continue;
    delivered = true;
    std::string ev_rv = ev.object->metadata.resource_version;
    switch (ev.type) {
      case client::EventType::bookmark:
        if (options_.metrics) options_.metrics->events_bookmark.Increment();
        sink_.on_resource_version(ev_rv);
        break;
      case client::EventType::added:
        if (options_.metrics) options_.metrics->events_added.Increment();
        sink_.on_event(ev.type, std::move(ev.object));
        break;
      case client::EventType::modified:
        if (options_.metrics) options_.metrics->events_modified.Increment();
        sink_.on_event(ev.type, std::move(ev.object));
        break;
      case client::EventType::deleted:
        if (options_.metrics) options_.metrics->events_deleted.Increment();
        sink_.on_event(ev.type, std::move(ev.object));
        break;
    }
    set_rv(ev_rv);
  }
  set_stream(nullptr, stop);
  if (options_.metrics) {
    options_.metrics->open_watches.Decrement();
    switch (out.end) {
      case WatchEnd::clean: options_.metrics->restarts_timeout.Increment(); break;
      case WatchEnd::expired:
      case WatchEnd::rv_too_large: options_.metrics->restarts_expired.Increment(); break;
      case WatchEnd::too_short:
      case WatchEnd::error: options_.metrics->restarts_error.Increment(); break;
      case WatchEnd::stopped: options_.metrics->restarts_shutdown.Increment(); break;
    }
  }
  return out;
}

void Reflector::run(std::stop_token stop) {
  std::stop_callback on_stop(stop, [this] {
    std::lock_guard lock(mu_);
    if (current_ != nullptr) current_->cancel();
  });
  bool need_list = true;
  // Every relist and reconnect spends a budget token; a wait that just took one (a backoff
  // wait, and the start) covers the next list.
  bool budget_taken = true;
  // Relist after an unusable RV: honour the server's Retry-After (a too-large RV says 1 s).
  auto relist_after = [&](const client::Error* e) {
    need_list = true;
    if (e == nullptr) return true;
    budget_taken = true;
    return wait_retry(e, false, stop);
  };
  while (!stop.stop_requested()) {
    if (need_list) {
      if (!budget_taken && !wait_retry(nullptr, false, stop)) break;  // relists spend budget
      budget_taken = false;
      // Each sync attempt starts as a WatchList: a refusal falls back to LIST for that attempt.
      client::Status s = options_.use_watch_list ? watch_list_sync(stop) : list_and_replace(stop);
      if (stop.stop_requested()) break;
      if (!s.ok()) {
        log("warn", "msg=\"list failed\" error=\"" + s.error().to_string() + "\"");
        if (!wait_retry(&s.error(), true, stop)) break;
        budget_taken = true;
        continue;
      }
      need_list = false;
    }
    client::WatchStreamPtr stream = std::move(pending_stream_);
    bool delivered = stream != nullptr;  // a WatchList stream delivered the initial events
    if (!stream) {
      client::ListOptions opts = base_options();
      opts.resource_version = rv();
      opts.allow_watch_bookmarks = true;
      opts.timeout_seconds = random_timeout_seconds();
      auto opened = lw_.watch(opts);
      if (stop.stop_requested()) break;
      if (!opened) {
        const client::Error& e = opened.error();
        if (e.code == client::Errc::cancelled) break;
        log("warn", "msg=\"watch failed\" error=\"" + e.to_string() + "\"");
        if (e.is_expired()) {
          if (options_.metrics) options_.metrics->restarts_expired.Increment();
          need_list = true;  // at the last synced RV; a 410 on that list goes to ""
          continue;
        }
        if (e.is_resource_version_too_large()) {
          if (options_.metrics) options_.metrics->restarts_expired.Increment();
          rv_unavailable_ = true;  // the server is behind our RV: relist at ""
          if (!relist_after(&e)) break;
          continue;
        }
        if (options_.metrics) options_.metrics->restarts_error.Increment();
        if (!wait_retry(&e, true, stop)) break;
        continue;
      }
      stream = std::move(opened).value();
      if (options_.metrics) options_.metrics->watch_starts.Increment();
    }
    WatchOutcome out = consume(*stream, stop, options_.clock->now(), delivered);
    stream.reset();
    switch (out.end) {
      case WatchEnd::stopped:
        return;
      case WatchEnd::clean:
        // Rewatch from the last RV without relisting; reconnects still spend budget.
        if (!wait_retry(nullptr, false, stop)) return;
        continue;
      case WatchEnd::too_short:
        // client-go's "very short watch": a server or proxy that closes watches at once would
        // otherwise be rewatched at the budget's full rate forever. Back off, then relist.
        log("warn", "msg=\"watch ended at once without events, backing off and relisting\" rv=" + rv());
        if (!wait_retry(nullptr, true, stop)) return;
        budget_taken = true;
        need_list = true;
        continue;
      case WatchEnd::expired:
        log("info", "msg=\"watch expired, relisting\" rv=" + rv());
        need_list = true;
        continue;
      case WatchEnd::rv_too_large:
        log("warn", "msg=\"resource version too large, relisting at an unset resourceVersion\" rv=" + rv());
        rv_unavailable_ = true;
        if (!relist_after(&out.error)) return;
        continue;
      case WatchEnd::error:
        log("warn", "msg=\"watch ended with error, rewatching\" rv=" + rv() + " error=\"" +
                        out.error.to_string() + "\"");
        if (!wait_retry(&out.error, true, stop)) return;
        continue;
    }
  }
}

}  // namespace kinformer::informer
