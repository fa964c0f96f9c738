#include "kinformer/informer/metrics.h"

#include <cstdio>

namespace kinformer::informer {
namespace {

const prometheus::Histogram::BucketBoundaries& list_buckets() {
  static const prometheus::Histogram::BucketBoundaries b{0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60};
  return b;
}
const prometheus::Histogram::BucketBoundaries& lag_buckets() {
  static const prometheus::Histogram::BucketBoundaries b{0.0001, 0.0005, 0.001, 0.005, 0.01,
                                                         0.05,   0.1,    0.5,   1,     5};
  return b;
}

std::map<std::string, std::string> with(std::map<std::string, std::string> labels,
                                        const std::string& k, const std::string& v) {
  labels[k] = v;
  return labels;
}

}  // namespace

Metrics::Metrics(prometheus::Registry& r)
    : open_watches(prometheus::BuildGauge().Name("kinformer_open_watches").Help("Open watch streams").Register(r)),
      watch_starts(prometheus::BuildCounter().Name("kinformer_watch_starts_total").Help("Watches opened").Register(r)),
      watch_restarts(prometheus::BuildCounter().Name("kinformer_watch_restarts_total").Help("Watch ends by reason (timeout, expired, error, shutdown)").Register(r)),
      lists(prometheus::BuildCounter().Name("kinformer_lists_total").Help("Completed lists (kind=initial|relist)").Register(r)),
      list_duration(prometheus::BuildHistogram().Name("kinformer_list_duration_seconds").Help("Duration of a complete (paginated) list").Register(r)),
      events(prometheus::BuildCounter().Name("kinformer_watch_events_total").Help("Watch events received by type").Register(r)),
      objects(prometheus::BuildGauge().Name("kinformer_cache_objects").Help("Objects in the cache").Register(r)),
      last_sync_timestamp(prometheus::BuildGauge().Name("kinformer_last_sync_timestamp_seconds").Help("Unix time the resourceVersion last advanced").Register(r)),
      backoff_waits(prometheus::BuildCounter().Name("kinformer_backoff_waits_total").Help("Waits before a retry").Register(r)),
      budget_denials(prometheus::BuildCounter().Name("kinformer_reconnect_budget_denials_total").Help("Reconnects delayed by the reconnect budget").Register(r)),
      handlers(prometheus::BuildGauge().Name("kinformer_registered_handlers").Help("Open registrations (reference count)").Register(r)),
      queue_depth(prometheus::BuildGauge().Name("kinformer_handler_queue_depth").Help("Pending notifications per handler, after coalescing").Register(r)),
      delivery_lag(prometheus::BuildHistogram().Name("kinformer_handler_delivery_lag_seconds").Help("Enqueue to callback start").Register(r)),
      stalled_since(prometheus::BuildGauge().Name("kinformer_handler_stalled_since_seconds").Help("Unix time the running callback started; 0 when idle").Register(r)),
      handler_exceptions(prometheus::BuildCounter().Name("kinformer_handler_exceptions_total").Help("Exceptions thrown by handler callbacks").Register(r)) {}

InformerMetrics::InformerMetrics(Metrics& f, const std::string& resource, const std::string& ns,
                                 const std::string& selector)
    : open_watches(f.open_watches.Add({{"resource", resource}, {"namespace", ns}, {"selector", selector}})),
      watch_starts(f.watch_starts.Add({{"resource", resource}, {"namespace", ns}, {"selector", selector}})),
      restarts_timeout(f.watch_restarts.Add({{"resource", resource}, {"namespace", ns}, {"selector", selector}, {"reason", "timeout"}})),
      restarts_expired(f.watch_restarts.Add({{"resource", resource}, {"namespace", ns}, {"selector", selector}, {"reason", "expired"}})),
      restarts_error(f.watch_restarts.Add({{"resource", resource}, {"namespace", ns}, {"selector", selector}, {"reason", "error"}})),
      restarts_shutdown(f.watch_restarts.Add({{"resource", resource}, {"namespace", ns}, {"selector", selector}, {"reason", "shutdown"}})),
      initial_lists(f.lists.Add({{"resource", resource}, {"namespace", ns}, {"selector", selector}, {"kind", "initial"}})),
      relists(f.lists.Add({{"resource", resource}, {"namespace", ns}, {"selector", selector}, {"kind", "relist"}})),
      list_duration(f.list_duration.Add({{"resource", resource}, {"namespace", ns}, {"selector", selector}}, list_buckets())),
      events_added(f.events.Add({{"resource", resource}, {"namespace", ns}, {"selector", selector}, {"type", "ADDED"}})),
      events_modified(f.events.Add({{"resource", resource}, {"namespace", ns}, {"selector", selector}, {"type", "MODIFIED"}})),
      events_deleted(f.events.Add({{"resource", resource}, {"namespace", ns}, {"selector", selector}, {"type", "DELETED"}})),
      events_bookmark(f.events.Add({{"resource", resource}, {"namespace", ns}, {"selector", selector}, {"type", "BOOKMARK"}})),
      objects(f.objects.Add({{"resource", resource}, {"namespace", ns}, {"selector", selector}})),
      last_sync_timestamp(f.last_sync_timestamp.Add({{"resource", resource}, {"namespace", ns}, {"selector", selector}})),
      backoff_waits(f.backoff_waits.Add({{"resource", resource}, {"namespace", ns}, {"selector", selector}})),
      budget_denials(f.budget_denials.Add({{"resource", resource}, {"namespace", ns}, {"selector", selector}})),
      handlers(f.handlers.Add({{"resource", resource}, {"namespace", ns}, {"selector", selector}})),
      families_(f),
      labels_{{"resource", resource}, {"namespace", ns}, {"selector", selector}} {}

prometheus::Counter& InformerMetrics::restarts(WatchRestartReason reason) {
  switch (reason) {
    case WatchRestartReason::timeout: return restarts_timeout;
    case WatchRestartReason::expired: return restarts_expired;
    case WatchRestartReason::error: return restarts_error;
    case WatchRestartReason::shutdown: break;
  }
  return restarts_shutdown;
}

HandlerMetrics::HandlerMetrics(InformerMetrics& informer, const std::string& name, std::uint64_t id)
    : queue_depth(informer.families().queue_depth.Add(
          with(with(informer.labels(), "handler", name), "id", std::to_string(id)))),
      delivery_lag(informer.families().delivery_lag.Add(
          with(with(informer.labels(), "handler", name), "id", std::to_string(id)), lag_buckets())),
      stalled_since(informer.families().stalled_since.Add(
          with(with(informer.labels(), "handler", name), "id", std::to_string(id)))),
      exceptions(informer.families().handler_exceptions.Add(
          with(with(informer.labels(), "handler", name), "id", std::to_string(id)))),
      families_(informer.families()) {}

HandlerMetrics::~HandlerMetrics() {
  families_.queue_depth.Remove(&queue_depth);
  families_.delivery_lag.Remove(&delivery_lag);
  families_.stalled_since.Remove(&stalled_since);
  families_.handler_exceptions.Remove(&exceptions);
}

std::string selector_hash(const std::string& label_selector, const std::string& field_selector) {
  if (label_selector.empty() && field_selector.empty()) return "";
  // FNV-1a, 32 bits: stable across runs and builds.
  std::uint32_t h = 2166136261u;
  auto mix = [&h](const std::string& s) {
    for (unsigned char c : s) {
      h ^= c;
      h *= 16777619u;
    }
  };
  mix(label_selector);
  mix("\x1f");
  mix(field_selector);
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", h);
  return buf;
}

}  // namespace kinformer::informer
