#pragma once
// Reflector: keeps a sink true to the API server with list + watch (client-go's Reflector).

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <vector>

#include "kinformer/client/io_runtime.h"
#include "kinformer/client/log.h"
#include "kinformer/client/watch.h"
#include "kinformer/informer/backoff.h"
#include "kinformer/informer/clock.h"
#include "kinformer/informer/reconnect_budget.h"
#include "kinformer/informer/reflector_metrics.h"

namespace kinformer::informer {

/// Where a Reflector delivers what it learns. Called from one thread at a time (the loop's).
class ReflectorSink {
 public:
  virtual ~ReflectorSink() = default;
  /// The complete current state (a list, or a WatchList's initial events) at `resource_version`.
  virtual void on_replace(std::vector<client::ObjectPtr> items,
                          const std::string& resource_version) = 0;
  /// One watch event (never a bookmark).
  virtual void on_event(client::EventType type, client::ObjectPtr object) = 0;
  /// Consecutive watch events (never bookmarks; at least one, at most
  /// Reflector::kMaxEventBatch), in the stream's order: read while the stream had more already
  /// received (client::WatchStream::buffered), until it had none, a bookmark came or the bound
  /// was reached. The sink may take their objects. The default hands them to on_event one by one.
  virtual void on_events(std::span<client::WatchEvent> events) {
    for (auto& e : events) on_event(e.type, std::move(e.object));
  }
  /// The resourceVersion advanced without a change (bookmark).
  virtual void on_resource_version(const std::string& resource_version) = 0;
};

/// Annotation on the BOOKMARK that ends a WatchList's initial events.
inline constexpr const char* kInitialEventsEndAnnotation = "k8s.io/initial-events-end";

/// The list and watch settings an InformerFactory gives every reflector it makes
/// (FactoryOptions::reflector); a ReflectorOptions holds them as its base.
struct ReflectorSettings {
  /// How long a WatchList's initial-events phase may go without any event before the reflector
  /// gives up on the `k8s.io/initial-events-end` bookmark and falls back to LIST for that sync (a
  /// server that ignores sendInitialEvents would otherwise keep the informer unsynced forever).
  /// An idle limit: it is checked once per period, so the fallback comes after between one and
  /// two periods of silence, and a large cache that keeps streaming is never cut by it. Measured
  /// on `clock`. Zero: no idle limit.
  std::chrono::milliseconds watch_list_initial_events_timeout{10'000};
  /// The total time the initial-events phase may take, events or not (an old server that
  /// ignores sendInitialEvents on a busy cluster streams changes forever and never goes idle).
  /// Then the sync falls back to LIST as above. Measured on `clock` from the stream's opening.
  /// Zero: no total limit.
  std::chrono::milliseconds watch_list_initial_events_deadline{120'000};
  /// A watch that ends cleanly sooner than this after it was opened, having delivered no event
  /// (bookmarks included), is an error: back off, then relist (client-go's "very short watch").
  /// Measured on `clock`. Zero: every clean end rewatches at once.
  std::chrono::milliseconds min_watch_duration{1'000};
  /// A watch that delivers no byte (event or bookmark) for this long is closed and resumed from
  /// its last resourceVersion (a rewatch, not a relist; counted as restart reason "idle").
  /// Every watch asks for bookmarks, and kube-apiserver's watch cache sends one about every 60 s
  /// (measured; docs/decisions.md), so a healthy watch is never cut and a silent path (a dead NAT
  /// entry, a stalled proxy) is found within this, from the first watch on. After three idle
  /// cuts with no periodic bookmark since (a server that sends none, e.g. for a resource served
  /// from etcd; a WatchList's initial-events-end bookmark does not count) the client's read-idle
  /// deadline applies instead (timeoutSeconds + 60 s), until a periodic bookmark comes. Zero:
  /// only the client's.
  std::chrono::milliseconds watch_idle_timeout{75'000};
  /// LIST page size.
  std::int64_t page_size = 500;
  /// The wait before retrying a failure (see Reflector). Null: a JitteredExponentialBackoff
  /// with `backoff`, `clock` and `random`.
  BackoffFactory make_backoff;
  /// The default backoff's settings (unused when make_backoff is set).
  BackoffOptions backoff;
};

/// Everything a Reflector runs with: its ReflectorSettings and what is its own.
struct ReflectorOptions : ReflectorSettings {
  /// Names the informer on every log line (`informer="..."`); SharedInformer sets its key.
  std::string name;
  /// Where log lines go (rate-limited per cause); the default writes to stderr.
  client::Logger log;
  std::string label_selector;
  std::string field_selector;
  /// Use a streaming list (WatchList) instead of LIST. A refusal falls back to LIST for that
  /// sync only; the next relist tries WatchList again (see Reflector).
  bool use_watch_list = false;
  /// Required: every wait and duration of the reflector (InformerFactory sets its own, by default
  /// system_clock()).
  ClockPtr clock;
  /// Required: backoff jitter and watch timeouts (InformerFactory sets its own, by default
  /// default_random()).
  RandomSource random;
  /// Optional: shared by every reflector of a client; taken before each relist and reconnect.
  ReconnectBudgetPtr budget;
  /// Where the reflector reports; must outlive it. Null: ReflectorMetrics::null().
  ReflectorMetrics* metrics = nullptr;
};

/// How fresh a reflector's view is (SharedInformer::freshness()).
struct Freshness {
  enum class State {
    fresh,      ///< synced, and the server was heard from within stale_after
    stale,      ///< synced, but nothing from the server for longer than stale_after
    resyncing,  ///< not synced yet, or a list (or WatchList) is rebuilding the state
  };
  State state = State::resyncing;
  /// When the server was last heard from (a list, a watch opened, an event, a bookmark), on the
  /// reflector's clock; nullopt before the first contact.
  std::optional<Clock::TimePoint> last_contact;
  /// Time since last_contact (zero before the first contact).
  Clock::Duration age{0};
  /// The silence after which the view counts as stale: the watch idle deadline in force.
  std::chrono::milliseconds stale_after{0};
  /// The last resourceVersion seen (events and bookmarks advance it); "" before the first list.
  std::string resource_version;
};
[[nodiscard]] std::string_view to_string(Freshness::State state) noexcept;
/// The staler of two views (of a cluster's or a feed's informers): stale if either is, else
/// resyncing if either is; the older contact, the longer age; `a`'s resourceVersion. A view with
/// no contact yet is the older one.
[[nodiscard]] Freshness stalest(Freshness a, const Freshness& b);

/// Lists then watches one resource and feeds a ReflectorSink, until stopped.
///
/// Protocol (client-go's rules): the first list is at resourceVersion "0", paginated (limit
/// page_size; continuation pages omit resourceVersion). Watches ask for bookmarks and a random
/// timeoutSeconds in [300, 600) and resume from the last seen resourceVersion (events and
/// bookmarks advance it). A clean end of a watch rewatches without relisting. A 410 (Expired /
/// Gone) on a watch relists at the last synced resourceVersion; a 410 on a list relists at an
/// unset resourceVersion (a consistent read). A watch silent past its idle deadline is resumed
/// from the last resourceVersion after a budget token only (ReflectorOptions::watch_idle_timeout).
/// Other failures (network, truncated or malformed streams, 429, 5xx) wait (backoff, at least
/// Retry-After, and a reconnect-budget token) and rewatch from the last good resourceVersion: no
/// relist, no lost event.
///
/// Unusable or failing requests:
/// - Too large resource version (Status cause ResourceVersionTooLarge, e.g. after an etcd
///   restore; on a list, on opening a watch or mid-stream): the last RV is marked unavailable,
///   and the next list, after the server's Retry-After, is at an unset resourceVersion.
/// - A watch that ends cleanly within min_watch_duration of opening, having delivered no event
///   (bookmarks count; a WatchList stream's initial events count), is an error (client-go's
///   "very short watch"): backoff, then relist at the last synced RV.
/// - A list at resourceVersion "0" (served from the watch cache, which may ignore limit) that
///   fails with Errc::too_large (over the client's max_response_bytes) is retried at once as a
///   consistent list with limit, which etcd paginates; lists that would be at "0" stay so.
///
/// WatchList (use_watch_list), as client-go: every sync attempt (the first list and each relist)
/// starts as a WatchList. A refusal (a 4xx other than 401, 404, 410 and 429: 400, 403, 405, 422
/// ...; or the stream ending cleanly before the initial-events-end bookmark) falls back to LIST
/// for that attempt only, so WatchList is tried again on the next relist. Transient failures
/// (network, timeout, truncated or malformed stream, 401, 404, 429, 5xx) back off and retry as
/// WatchList; 410 / a too-large RV retry it at an unset RV. If the initial-events-end bookmark
/// has not come while events stopped for watch_list_initial_events_timeout, or within
/// watch_list_initial_events_deadline in all (a server that ignores sendInitialEvents), a timer
/// (living only during that phase) cancels the stream and the attempt falls back to LIST.
/// Fallbacks are counted (InformerMetrics::watch_list_fallbacks_*).
///
/// One loop: a WatchList stream is a watch in two phases. In the initial-events phase its events
/// build the new state, and the initial-events-end bookmark replaces the sink's contents with it
/// (that is the sync); the same stream then goes on in the steady phase, where events go to the
/// sink, exactly as a watch opened after a LIST. run() steps sync -> watch -> ..., and the rules
/// above live in two functions: what a LIST's outcome leads to, and what a watch's end (by
/// phase) leads to, with the wait before the next step. Every log line names the informer
/// (ReflectorOptions::name).
///
/// Threading: the loop is a coroutine. start() runs it on an IoRuntime's threads, which it holds
/// only while it has work: a watch whose stream can say when it is ready
/// (WatchStream::notify_when_ready, as the client's can) and the waits on the system clock take no
/// thread while they wait. Calls that block (a list with its pages and on_replace, opening a
/// watch, reading a stream that cannot say, a wait on an injected clock) run on a shared pool of
/// threads that exist while such calls do. run() drives the same loop from the calling thread
/// (its blocking calls still go to the pool). The sink is called from one thread at a time. A stop
/// request cancels the open watch (WatchStream::cancel) and wakes any wait. Only `stop` ends the
/// loop: a cancellation it did not ask for (the client shut down under a running informer) is a
/// failure like any other, retried with backoff and logged. An in-flight LIST request is not
/// interruptible: its bound is the client's request deadline. Accessors are thread-safe.
class Reflector {
 public:
  /// `lister_watcher` and `sink` must outlive the reflector. Throws client::ConfigError without
  /// a clock or random source, or if options.make_backoff returns null.
  Reflector(client::ListerWatcher& lister_watcher, ReflectorSink& sink, ReflectorOptions options);
  /// At most this many buffered watch events go to ReflectorSink::on_events at once (no more
  /// than the informer's chunk for handing a list to its handlers, so a batch is one chunk).
  static constexpr std::size_t kMaxEventBatch = 256;
  Reflector(const Reflector&) = delete;
  Reflector& operator=(const Reflector&) = delete;

  /// Runs the loop on the calling thread until `stop` is requested.
  void run(const std::stop_token& stop);
  /// Runs the loop on `runtime`'s threads until `stop` is requested, and returns at once; `done`
  /// is called (on a runtime thread) when the loop has ended. The reflector, its lister-watcher
  /// and its sink must outlive that call; `runtime` must outlive the reflector.
  void start(client::IoRuntime& runtime, std::stop_token stop, std::function<void()> done);

  /// The resourceVersion the sink is synced to ("" before the first list).
  [[nodiscard]] std::string last_sync_resource_version() const;
  /// True when the latest WatchList sync attempt fell back to LIST (refused, or no
  /// initial-events-end bookmark in time); false again after a WatchList sync succeeds.
  [[nodiscard]] bool watch_list_fell_back() const;
  /// How fresh the view is now. Thread-safe.
  [[nodiscard]] Freshness freshness() const;
  /// The idle deadline watches get now: watch_idle_timeout while bookmarks are expected, else
  /// the client's (timeoutSeconds + 60 s: at most 659 s; RestClientOptions::watch_idle_timeout
  /// replaces it when set, which this does not see).
  [[nodiscard]] std::chrono::milliseconds idle_deadline() const;

 private:
  // run() is one loop over Steps; each step's outcome decides the next step and the wait before
  // it (after_list, after_watch: every rule in one place).
  enum class Step {
    sync,   // a WatchList (use_watch_list) or a LIST that replaces the sink's contents
    list,   // a LIST for this sync attempt, after the WatchList was refused or timed out
    watch,  // a watch from the last resourceVersion
    stop,
  };
  enum class Wait {
    none,     // at once
    budget,   // a reconnect-budget token (and the error's Retry-After)
    backoff,  // backoff, the error's Retry-After and a budget token, whichever is longest
  };
  struct Next {
    Step step;
    Wait wait = Wait::none;
    std::optional<client::Error> error;  // the failure that led here (for Retry-After)
  };
  // The phase of one watch stream.
  enum class Phase {
    initial_events,  // a WatchList stream before its initial-events-end bookmark
    steady,          // events go to the sink as they come
  };
  struct WatchOutcome {
    WatchRestartReason end = WatchRestartReason::timeout;
    Phase phase = Phase::steady;  // the phase the stream ended in
    client::Error error;          // expired, error: the failure
    bool idle = false;            // initial_events_timeout: the idle limit fired (else the total)
  };

  // The coroutines of the loop (reflector.cc): run, watch (opens a watch and reads it to its
  // end) and wait (as a Next says).
  struct Loop;
  friend struct Loop;
  /// Lists every page and replaces the sink's contents (blocks: runs on the blocking pool).
  client::Status list_and_replace(std::stop_token stop);
  Next after_list(client::Status status, const std::stop_token& stop);
  Next after_watch(WatchOutcome out);
  Next fall_back_to_list(const std::string& why, WatchListFallback reason);
  /// The wait a `next` asks for (backoff, Retry-After, a budget token), and its metrics.
  Clock::Duration wait_for(const Next& next);
  /// The sink now holds the complete state at `resource_version` (a sync that began at `started`).
  void synced(const std::string& resource_version, std::vector<client::ObjectPtr> items,
              Clock::TimePoint started);

  client::ListOptions base_options() const;
  client::ListOptions list_options() const;
  client::ListOptions watch_list_options();
  client::ListOptions rewatch_options();
  int random_timeout_seconds();
  void set_watch_list_fell_back(bool fell_back);
  bool set_stream(client::WatchStream* stream, const std::stop_token& stop);
  void set_rv(const std::string& rv);
  std::string rv() const;

  client::ListerWatcher& lw_;
  ReflectorSink& sink_;
  ReflectorOptions options_;
  ReflectorMetrics& metrics_;
  BackoffPtr backoff_;  // the loop
  client::Logger log_;

  // The loop's state (one thread at a time).
  bool rv_unavailable_ = false;          // 410 on a list, or a too-large RV: next list at unset RV
  bool list_at_zero_too_large_ = false;  // a list at RV "0" was too large: list at unset RV
  bool listed_once_ = false;

  // Freshness, read by freshness() from any thread.
  std::atomic<Clock::Duration::rep> last_contact_{0};  // ticks (clock's epoch) of the last contact
  std::atomic<bool> contacted_{false};                 // last_contact_ is set
  std::atomic<bool> resyncing_{true};                  // a sync (list or WatchList) is in progress
  // Every watch asks for bookmarks, and kube-apiserver's watch cache sends one about every 60 s,
  // so silence past watch_idle_timeout is taken for a dead path until three idle cuts without a
  // periodic bookmark show that this server sends none here (a resource served from etcd).
  std::atomic<bool> expect_bookmarks_{true};
  // The loop: idle restarts since the last periodic bookmark, or since a watch resumed
  // after one replayed events at once (kReplayWindow: the cut path was dead).
  int idle_cuts_without_bookmark_ = 0;
  bool resuming_after_idle_ = false;  // the loop: the next watch follows an idle cut
  static constexpr std::chrono::seconds kReplayWindow{2};
  void touch();  // the server was heard from now
  // Reports the view stale to the metrics when it is (or `cut_idle`: a watch was just silent for
  // its idle deadline), once until the next contact. The loop.
  void report_stale(bool cut_idle);
  // How long until the view turns stale without contact; zero when it is, or is reported, or
  // there was no contact yet. The loop.
  [[nodiscard]] Clock::Duration time_until_stale() const;
  bool stale_reported_ = false;  // the loop
  // The idle deadline a new watch asks the client for: watch_idle_timeout while periodic
  // bookmarks are expected here, else 0 (the client's own).
  [[nodiscard]] std::chrono::milliseconds new_watch_idle_timeout() const;

  mutable std::mutex mu_;
  std::string last_rv_;                     // guarded by mu_
  bool watch_list_fell_back_ = false;       // guarded by mu_
  client::WatchStream* current_ = nullptr;  // guarded by mu_
};

}  // namespace kinformer::informer
