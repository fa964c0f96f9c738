#pragma once
// Prometheus metrics of informers. Families are registered once per registry (InformerFactory
// creates one Metrics) and handed out by reference; label values are bounded: resource,
// namespace, an 8-hex-digit hash of the selectors, and the handler's configured name.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "kinformer/informer/reflector_metrics.h"

namespace kinformer::informer {

/// The metric families. Thread-safe (prometheus-cpp metrics are).
class Metrics {
 public:
  /// Registers every family in `registry`; keeps the registry alive (InformerMetrics keep this
  /// object alive, so metrics of a Registration that outlives its factory stay valid).
  explicit Metrics(std::shared_ptr<prometheus::Registry> registry);

 private:
  std::shared_ptr<prometheus::Registry> registry_;

 public:
  prometheus::Family<prometheus::Gauge>& open_watches;
  prometheus::Family<prometheus::Counter>& watch_starts;
  prometheus::Family<prometheus::Counter>& watch_restarts;  ///< + label reason
  prometheus::Family<prometheus::Counter>& lists;           ///< + label kind=initial|relist
  prometheus::Family<prometheus::Histogram>& list_duration;
  prometheus::Family<prometheus::Counter>& events;  ///< + label type
  prometheus::Family<prometheus::Gauge>& objects;
  prometheus::Family<prometheus::Gauge>& last_sync_timestamp;
  prometheus::Family<prometheus::Gauge>& last_contact_timestamp;
  prometheus::Family<prometheus::Gauge>& stale;
  prometheus::Family<prometheus::Counter>& backoff_waits;
  prometheus::Family<prometheus::Counter>& budget_denials;
  prometheus::Family<prometheus::Counter>& watch_list_fallbacks;  ///< + label reason
  prometheus::Family<prometheus::Counter>& requests;              ///< + label verb=list|watch
  prometheus::Family<prometheus::Counter>& request_errors;        ///< + labels verb, reason
  prometheus::Family<prometheus::Gauge>& handlers;
  prometheus::Family<prometheus::Gauge>& queue_depth;           ///< + label handler
  prometheus::Family<prometheus::Histogram>& delivery_lag;      ///< + label handler
  prometheus::Family<prometheus::Gauge>& stalled_since;         ///< + label handler
  prometheus::Family<prometheus::Counter>& handler_exceptions;  ///< + label handler
};

/// The metrics of one informer (one informer key); its reflector reports to them through
/// ReflectorMetrics. Thread-safe.
class InformerMetrics final : public ReflectorMetrics {
 public:
  /// Labels: resource, namespace (empty: all), selector (hash of label and field selectors).
  InformerMetrics(std::shared_ptr<Metrics> families, const std::string& resource,
                  const std::string& ns, const std::string& selector_hash);

  prometheus::Gauge& open_watches;
  prometheus::Counter& watch_starts;
  prometheus::Counter& restarts_timeout;
  prometheus::Counter& restarts_expired;
  prometheus::Counter& restarts_error;
  prometheus::Counter& restarts_idle;  ///< no byte within the watch's idle deadline
  prometheus::Counter& restarts_shutdown;
  prometheus::Counter& initial_lists;
  prometheus::Counter& relists;
  prometheus::Histogram& list_duration;
  prometheus::Counter& events_added;
  prometheus::Counter& events_modified;
  prometheus::Counter& events_deleted;
  prometheus::Counter& events_bookmark;
  prometheus::Gauge& objects;
  prometheus::Gauge& last_sync_timestamp;  ///< unix seconds of the last list/bookmark/event
  /// Unix seconds the server was last heard from (a list page, a watch opened, an event, a
  /// bookmark): the age of the view is time() minus this.
  prometheus::Gauge& last_contact_timestamp;
  prometheus::Gauge& stale_state;  ///< 1 while the view is stale (Reflector::freshness), else 0
  prometheus::Counter& backoff_waits;
  prometheus::Counter& budget_denials;
  /// WatchList syncs that fell back to LIST: refused by the server (4xx, or the stream ended
  /// before the initial-events-end bookmark) ...
  prometheus::Counter& watch_list_fallbacks_refused;
  /// ... or no initial-events-end bookmark: the initial events went idle for
  /// watch_list_initial_events_timeout or took watch_list_initial_events_deadline in all.
  prometheus::Counter& watch_list_fallbacks_timeout;
  prometheus::Gauge& handlers;  ///< the registration refcount
  /// LIST pages the reflector asked the client for (each page once; the client's own retry of a
  /// 401 with fresh credentials is not counted again).
  prometheus::Counter& list_requests;
  /// Watches the reflector asked the client to open (WatchList syncs included).
  prometheus::Counter& watch_requests;

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
  prometheus::Counter& request_errors(std::string_view verb, std::string_view reason);
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

  prometheus::Gauge& queue_depth;
  prometheus::Histogram& delivery_lag;  ///< seconds from enqueue to callback start
  prometheus::Gauge& stalled_since;     ///< unix seconds the running callback started; 0 if idle
  prometheus::Counter& exceptions;

 private:
  Metrics& families_;
};

/// 8 hex digits identifying a (label selector, field selector) pair; "" when both are empty.
std::string selector_hash(const std::string& label_selector, const std::string& field_selector);

}  // namespace kinformer::informer
