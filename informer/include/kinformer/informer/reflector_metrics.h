#pragma once
// ReflectorMetrics: what a Reflector reports, as an interface with a null object (InformerMetrics
// implements it with Prometheus series).

#include "kinformer/client/watch.h"

namespace kinformer::informer {

/// Why a watch stream ended: what the Reflector decides its next step by, and (for the first four)
/// the `reason` label of kinformer_watch_restarts_total.
enum class WatchRestartReason {
  timeout,   ///< the server ended the stream cleanly (its timeoutSeconds): rewatch, no relist
  expired,   ///< the resourceVersion is unusable: 410 Expired / Gone, or too large (504)
  error,     ///< opening or reading the stream failed otherwise (network, decode, 429, 5xx ...)
  shutdown,  ///< the reflector was stopped
  /// Ended cleanly within min_watch_duration having delivered nothing (client-go's "very short
  /// watch"): counted as `error`.
  too_short,
  /// A WatchList stream ended cleanly before its initial-events-end bookmark (a refusal).
  no_initial_events_end,
  /// No initial-events-end bookmark: idle for watch_list_initial_events_timeout, or not within
  /// watch_list_initial_events_deadline.
  initial_events_timeout,
  /// No byte from the server for the watch's idle deadline (ReflectorOptions::
  /// watch_idle_timeout): the path may be dead. Resumed from the last resourceVersion.
  idle,
};

/// Why a WatchList sync attempt fell back to LIST (kinformer_watch_list_fallbacks_total).
enum class WatchListFallback {
  refused,                 ///< a 4xx refusal, or the stream ended before the bookmark
  initial_events_timeout,  ///< no initial-events-end bookmark in time
};

/// What a Reflector reports, one call per fact (see informer/METRICS.md for the series).
/// Called from the reflector's thread; an implementation shared by several reflectors must be
/// thread-safe. Must outlive the reflectors that report to it.
class ReflectorMetrics {
 public:
  virtual ~ReflectorMetrics() = default;
  /// A watch stream opened (a WatchList's too) ...
  virtual void watch_opened() = 0;
  /// ... and closed again.
  virtual void watch_closed() = 0;
  /// A watch past its initial events ended for `reason` (a WatchList's sync attempt that did not
  /// complete is reported as watch_list_fell_back() or as a failed sync instead).
  virtual void watch_ended(WatchRestartReason reason) = 0;
  /// A watch event: every bookmark, and the other events past a WatchList's initial events.
  virtual void event(client::EventType type) = 0;
  /// The sink holds a complete state, from the first sync (`initial`) or a relist, `seconds`
  /// after that sync started.
  virtual void synced(bool initial, double seconds) = 0;
  /// The reflector waits before a retry or a reconnect.
  virtual void backoff_waited() = 0;
  /// The reconnect budget made a relist or reconnect wait.
  virtual void budget_denied() = 0;
  /// A WatchList sync attempt fell back to LIST.
  virtual void watch_list_fell_back(WatchListFallback why) = 0;
  /// The server was heard from: a list page, a watch opened, an event, a bookmark. (Default:
  /// nothing, so implementations written before it still compile.)
  virtual void contacted() {}
  /// The view turned stale (nothing from the server past the idle deadline: see
  /// Reflector::freshness) or, at the next contact, fresh again. Only changes are reported.
  virtual void stale(bool /*is_stale*/) {}

  /// Reports nowhere: the metrics of a reflector given none. Thread-safe.
  static ReflectorMetrics& null();
};

}  // namespace kinformer::informer
