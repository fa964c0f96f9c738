#pragma once
// The metrics of informers. Families are registered once per registry (InformerFactory creates
// one Metrics) and handed out by reference; label values are bounded: resource, namespace, an
// 8-hex-digit hash of the selectors, and the handler's configured name.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "kinformer/informer/metrics_registry.h"
#include "kinformer/informer/reflector_metrics.h"

namespace kinformer::informer {

/// The metric families. Thread-safe (MetricsRegistry series are).
class Metrics {
 public:
  /// Registers every family in `registry`; keeps the registry alive (InformerMetrics keep this
  /// object alive, so metrics of a Registration that outlives its factory stay valid).
  explicit Metrics(std::shared_ptr<MetricsRegistry> registry);

 private:
  std::shared_ptr<MetricsRegistry> registry_;

 public:
  GaugeFamily& open_watches;
  CounterFamily& watch_starts;
  CounterFamily& watch_restarts;  ///< + label reason
  CounterFamily& lists;           ///< + label kind=initial|relist
  HistogramFamily& list_duration;
  CounterFamily& events;  ///< + label type
  GaugeFamily& objects;
  GaugeFamily& last_sync_timestamp;
  GaugeFamily& last_contact_timestamp;
  GaugeFamily& stale;
  CounterFamily& backoff_waits;
  CounterFamily& budget_denials;
  CounterFamily& watch_list_fallbacks;  ///< + label reason
  CounterFamily& requests;              ///< + label verb=list|watch
  CounterFamily& request_errors;        ///< + labels verb, reason
  GaugeFamily& handlers;
  GaugeFamily& queue_depth;           ///< + label handler
  HistogramFamily& delivery_lag;      ///< + label handler
  GaugeFamily& stalled_since;         ///< + label handler
  CounterFamily& handler_exceptions;  ///< + label handler
};

/// The metrics of one informer (one informer key); its reflector reports to them through
/// ReflectorMetrics. Thread-safe.
class InformerMetrics final : public ReflectorMetrics {
 public:
  /// Labels: resource, namespace (empty: all), selector (hash of label and field selectors).
  InformerMetrics(std::shared_ptr<Metrics> families, const std::string& resource,
                  const std::string& ns, const std::string& selector_hash);

  Gauge& open_watches;
  Counter& watch_starts;
  Counter& restarts_timeout;
  Counter& restarts_expired;
  Counter& restarts_error;
  Counter& restarts_idle;  ///< no byte within the watch's idle deadline
  Counter& restarts_shutdown;
  Counter& initial_lists;
  Counter& relists;
  Histogram& list_duration;
  Counter& events_added;
  Counter& events_modified;
  Counter& events_deleted;
  Counter& events_bookmark;
  Gauge& objects;
  Gauge& last_sync_timestamp;  ///< unix seconds of the last list/bookmark/event
  /// Unix seconds the server was last heard from (a list page, a watch opened, an event, a
  /// bookmark): the age of the view is time() minus this.
  Gauge& last_contact_timestamp;
  Gauge& stale_state;  ///< 1 while the view is stale (Reflector::freshness), else 0
  Counter& backoff_waits;
  Counter& budget_denials;
  /// WatchList syncs that fell back to LIST: refused by the server (4xx, or the stream ended
  /// before the initial-events-end bookmark) ...
  Counter& watch_list_fallbacks_refused;
  /// ... or no initial-events-end bookmark: the initial events went idle for
  /// watch_list_initial_events_timeout or took watch_list_initial_events_deadline in all.
  Counter& watch_list_fallbacks_timeout;
  Gauge& handlers;  ///< the registration refcount
  /// LIST pages the reflector asked the client for (each page once; the client's own retry of a
  /// 401 with fresh credentials is not counted again).
  Counter& list_requests;
  /// Watches the reflector asked the client to open (WatchList syncs included).
  Counter& watch_requests;

  // ReflectorMetrics: each fact to its series.
  void watch_opened() override;
  void watch_closed() override;
  void watch_ended(WatchRestartReason reason) override;
  void event(client::EventType type) override;
  void synced(bool initial, double seconds) override;
  void backoff_waited() override;
  void budget_denied() override;
  void watch_list_fell_back(WatchListFallback why) override;
  void contacted() override;
  void stale(bool is_stale) override;

  /// The counter of failed requests of `verb` ("list" or "watch") for `reason` (error_reason():
  /// a bounded set), created at its first failure.
  Counter& request_errors(std::string_view verb, std::string_view reason);
  Metrics& families() { return *keep_; }
  const std::map<std::string, std::string>& labels() const { return labels_; }

 private:
  std::shared_ptr<Metrics> keep_;
  std::map<std::string, std::string> labels_;
};

/// Metrics of one registration; removed from the families when the registration closes.
class HandlerMetrics {
 public:
  /// Labels: the informer's, plus handler (the configured name) and id (the registration id).
  HandlerMetrics(InformerMetrics& informer, const std::string& handler_name, std::uint64_t id);
  ~HandlerMetrics();
  HandlerMetrics(const HandlerMetrics&) = delete;
  HandlerMetrics& operator=(const HandlerMetrics&) = delete;

  Gauge& queue_depth;
  Histogram& delivery_lag;  ///< seconds from enqueue to callback start
  Gauge& stalled_since;     ///< unix seconds the running callback started; 0 if idle
  Counter& exceptions;

 private:
  Metrics& families_;
};

/// 8 hex digits identifying a (label selector, field selector) pair; "" when both are empty.
std::string selector_hash(const std::string& label_selector, const std::string& field_selector);

}  // namespace kinformer::informer
