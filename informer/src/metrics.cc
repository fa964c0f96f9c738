#include "kinformer/informer/metrics.h"

#include <cstdio>

#include "detail/unix_time.h"

namespace kinformer::informer {
namespace {

const prometheus::Histogram::BucketBoundaries& list_buckets() {
  static const prometheus::Histogram::BucketBoundaries b{0.01, 0.05, 0.1, 0.5, 1,
                                                         2.5,  5,    10,  30,  60};
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

Metrics::Metrics(std::shared_ptr<prometheus::Registry> registry)
    : registry_(std::move(registry)),
      open_watches(prometheus::BuildGauge()
                       .Name("kinformer_open_watches")
                       .Help("Open watch streams")
                       .Register(*registry_)),
      watch_starts(prometheus::BuildCounter()
                       .Name("kinformer_watch_starts_total")
                       .Help("Watches opened")
                       .Register(*registry_)),
      watch_restarts(prometheus::BuildCounter()
                         .Name("kinformer_watch_restarts_total")
                         .Help("Watch ends by reason (timeout, expired, error, shutdown)")
                         .Register(*registry_)),
      lists(prometheus::BuildCounter()
                .Name("kinformer_lists_total")
                .Help("Completed lists (kind=initial|relist)")
                .Register(*registry_)),
      list_duration(prometheus::BuildHistogram()
                        .Name("kinformer_list_duration_seconds")
                        .Help("Duration of a complete (paginated) list")
                        .Register(*registry_)),
      events(prometheus::BuildCounter()
                 .Name("kinformer_watch_events_total")
                 .Help("Watch events received by type")
                 .Register(*registry_)),
      objects(prometheus::BuildGauge()
                  .Name("kinformer_cache_objects")
                  .Help("Objects in the cache")
                  .Register(*registry_)),
      last_sync_timestamp(prometheus::BuildGauge()
                              .Name("kinformer_last_sync_timestamp_seconds")
                              .Help("Unix time the resourceVersion last advanced")
                              .Register(*registry_)),
      last_contact_timestamp(prometheus::BuildGauge()
                                 .Name("kinformer_last_contact_timestamp_seconds")
                                 .Help("Unix time the API server was last heard from")
                                 .Register(*registry_)),
      stale(prometheus::BuildGauge()
                .Name("kinformer_cache_stale")
                .Help("1 while nothing came from the API server past the idle deadline")
                .Register(*registry_)),
      backoff_waits(prometheus::BuildCounter()
                        .Name("kinformer_backoff_waits_total")
                        .Help("Waits before a retry")
                        .Register(*registry_)),
      budget_denials(prometheus::BuildCounter()
                         .Name("kinformer_reconnect_budget_denials_total")
                         .Help("Reconnects delayed by the reconnect budget")
                         .Register(*registry_)),
      watch_list_fallbacks(
          prometheus::BuildCounter()
              .Name("kinformer_watch_list_fallbacks_total")
              .Help(
                  "WatchList syncs that fell back to LIST (reason=refused|initial_events_timeout)")
              .Register(*registry_)),
      requests(prometheus::BuildCounter()
                   .Name("kinformer_requests_total")
                   .Help("LIST pages and watch openings the reflector requested (verb=list|watch)")
                   .Register(*registry_)),
      request_errors(prometheus::BuildCounter()
                         .Name("kinformer_request_errors_total")
                         .Help("Failed LIST pages and watch openings by verb and reason "
                               "(unauthorized, forbidden, network, ...)")
                         .Register(*registry_)),
      handlers(prometheus::BuildGauge()
                   .Name("kinformer_registered_handlers")
                   .Help("Open registrations (reference count)")
                   .Register(*registry_)),
      queue_depth(prometheus::BuildGauge()
                      .Name("kinformer_handler_queue_depth")
                      .Help("Pending notifications per handler, after coalescing")
                      .Register(*registry_)),
      delivery_lag(prometheus::BuildHistogram()
                       .Name("kinformer_handler_delivery_lag_seconds")
                       .Help("Enqueue to callback start")
                       .Register(*registry_)),
      stalled_since(prometheus::BuildGauge()
                        .Name("kinformer_handler_stalled_since_seconds")
                        .Help("Unix time the running callback started; 0 when idle")
                        .Register(*registry_)),
      handler_exceptions(prometheus::BuildCounter()
                             .Name("kinformer_handler_exceptions_total")
                             .Help("Exceptions thrown by handler callbacks")
                             .Register(*registry_)) {}

InformerMetrics::InformerMetrics(std::shared_ptr<Metrics> fp, const std::string& resource,
                                 const std::string& ns, const std::string& selector)
    : open_watches(fp->open_watches.Add(
          {{"resource", resource}, {"namespace", ns}, {"selector", selector}})),
      watch_starts(fp->watch_starts.Add(
          {{"resource", resource}, {"namespace", ns}, {"selector", selector}})),
      restarts_timeout(fp->watch_restarts.Add({{"resource", resource},
                                               {"namespace", ns},
                                               {"selector", selector},
                                               {"reason", "timeout"}})),
      restarts_expired(fp->watch_restarts.Add({{"resource", resource},
                                               {"namespace", ns},
                                               {"selector", selector},
                                               {"reason", "expired"}})),
      restarts_error(fp->watch_restarts.Add({{"resource", resource},
                                             {"namespace", ns},
                                             {"selector", selector},
                                             {"reason", "error"}})),
      restarts_idle(fp->watch_restarts.Add(
          {{"resource", resource}, {"namespace", ns}, {"selector", selector}, {"reason", "idle"}})),
      restarts_shutdown(fp->watch_restarts.Add({{"resource", resource},
                                                {"namespace", ns},
                                                {"selector", selector},
                                                {"reason", "shutdown"}})),
      initial_lists(fp->lists.Add({{"resource", resource},
                                   {"namespace", ns},
                                   {"selector", selector},
                                   {"kind", "initial"}})),
      relists(fp->lists.Add(
          {{"resource", resource}, {"namespace", ns}, {"selector", selector}, {"kind", "relist"}})),
      list_duration(fp->list_duration.Add(
          {{"resource", resource}, {"namespace", ns}, {"selector", selector}}, list_buckets())),
      events_added(fp->events.Add(
          {{"resource", resource}, {"namespace", ns}, {"selector", selector}, {"type", "ADDED"}})),
      events_modified(fp->events.Add({{"resource", resource},
                                      {"namespace", ns},
                                      {"selector", selector},
                                      {"type", "MODIFIED"}})),
      events_deleted(fp->events.Add({{"resource", resource},
                                     {"namespace", ns},
                                     {"selector", selector},
                                     {"type", "DELETED"}})),
      events_bookmark(fp->events.Add({{"resource", resource},
                                      {"namespace", ns},
                                      {"selector", selector},
                                      {"type", "BOOKMARK"}})),
      objects(fp->objects.Add({{"resource", resource}, {"namespace", ns}, {"selector", selector}})),
      last_sync_timestamp(fp->last_sync_timestamp.Add(
          {{"resource", resource}, {"namespace", ns}, {"selector", selector}})),
      last_contact_timestamp(fp->last_contact_timestamp.Add(
          {{"resource", resource}, {"namespace", ns}, {"selector", selector}})),
      stale_state(
          fp->stale.Add({{"resource", resource}, {"namespace", ns}, {"selector", selector}})),
      backoff_waits(fp->backoff_waits.Add(
          {{"resource", resource}, {"namespace", ns}, {"selector", selector}})),
      budget_denials(fp->budget_denials.Add(
          {{"resource", resource}, {"namespace", ns}, {"selector", selector}})),
      watch_list_fallbacks_refused(fp->watch_list_fallbacks.Add({{"resource", resource},
                                                                 {"namespace", ns},
                                                                 {"selector", selector},
                                                                 {"reason", "refused"}})),
      watch_list_fallbacks_timeout(
          fp->watch_list_fallbacks.Add({{"resource", resource},
                                        {"namespace", ns},
                                        {"selector", selector},
                                        {"reason", "initial_events_timeout"}})),
      handlers(
          fp->handlers.Add({{"resource", resource}, {"namespace", ns}, {"selector", selector}})),
      list_requests(fp->requests.Add(
          {{"resource", resource}, {"namespace", ns}, {"selector", selector}, {"verb", "list"}})),
      watch_requests(fp->requests.Add(
          {{"resource", resource}, {"namespace", ns}, {"selector", selector}, {"verb", "watch"}})),
      keep_(std::move(fp)),
      labels_{{"resource", resource}, {"namespace", ns}, {"selector", selector}} {}

void InformerMetrics::watch_opened() {
  watch_starts.Increment();
  open_watches.Increment();
}

void InformerMetrics::watch_closed() { open_watches.Decrement(); }

void InformerMetrics::contacted() { last_contact_timestamp.Set(detail::unix_now()); }

void InformerMetrics::stale(bool is_stale) { stale_state.Set(is_stale ? 1 : 0); }

void InformerMetrics::watch_ended(WatchRestartReason reason) {
  switch (reason) {
    case WatchRestartReason::timeout:
      restarts_timeout.Increment();
      break;
    case WatchRestartReason::expired:
      restarts_expired.Increment();
      break;
    case WatchRestartReason::error:
    case WatchRestartReason::too_short:
      restarts_error.Increment();
      break;
    case WatchRestartReason::idle:
      restarts_idle.Increment();
      break;
    case WatchRestartReason::shutdown:
      restarts_shutdown.Increment();
      break;
    case WatchRestartReason::no_initial_events_end:
    case WatchRestartReason::initial_events_timeout:
      break;  // WatchList fallbacks, counted there
  }
}

void InformerMetrics::event(client::EventType type) {
  switch (type) {
    case client::EventType::added:
      events_added.Increment();
      break;
    case client::EventType::modified:
      events_modified.Increment();
      break;
    case client::EventType::deleted:
      events_deleted.Increment();
      break;
    case client::EventType::bookmark:
      events_bookmark.Increment();
      break;
  }
}

void InformerMetrics::synced(bool initial, double seconds) {
  (initial ? initial_lists : relists).Increment();
  list_duration.Observe(seconds);
}

void InformerMetrics::backoff_waited() { backoff_waits.Increment(); }

void InformerMetrics::budget_denied() { budget_denials.Increment(); }

void InformerMetrics::watch_list_fell_back(WatchListFallback why) {
  (why == WatchListFallback::initial_events_timeout ? watch_list_fallbacks_timeout
                                                    : watch_list_fallbacks_refused)
      .Increment();
}

prometheus::Counter& InformerMetrics::request_errors(std::string_view verb,
                                                     std::string_view reason) {
  return keep_->request_errors.Add(
      with(with(labels_, "verb", std::string(verb)), "reason", std::string(reason)));
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
