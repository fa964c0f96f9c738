#include "kinformer/informer/metrics.h"

#include <cstdio>

#include "detail/unix_time.h"

namespace kinformer::informer {
namespace {

const std::vector<double>& list_buckets() {
  static const std::vector<double> b{0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60};
  return b;
}
const std::vector<double>& lag_buckets() {
  static const std::vector<double> b{0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5};
  return b;
}

std::map<std::string, std::string> with(std::map<std::string, std::string> labels,
                                        const std::string& k, const std::string& v) {
  labels[k] = v;
  return labels;
}

}  // namespace

Metrics::Metrics(std::shared_ptr<MetricsRegistry> registry)
    : registry_(std::move(registry)),
      open_watches(registry_->gauge("kinformer_open_watches", "Open watch streams")),
      watch_starts(registry_->counter("kinformer_watch_starts_total", "Watches opened")),
      watch_restarts(
          registry_->counter("kinformer_watch_restarts_total",
                             "Watch ends by reason (timeout, expired, error, shutdown)")),
      lists(registry_->counter("kinformer_lists_total", "Completed lists (kind=initial|relist)")),
      list_duration(registry_->histogram("kinformer_list_duration_seconds",
                                         "Duration of a complete (paginated) list",
                                         list_buckets())),
      events(registry_->counter("kinformer_watch_events_total", "Watch events received by type")),
      objects(registry_->gauge("kinformer_cache_objects", "Objects in the cache")),
      last_sync_timestamp(registry_->gauge("kinformer_last_sync_timestamp_seconds",
                                           "Unix time the resourceVersion last advanced")),
      last_contact_timestamp(registry_->gauge("kinformer_last_contact_timestamp_seconds",
                                              "Unix time the API server was last heard from")),
      stale(registry_->gauge("kinformer_cache_stale",
                             "1 while nothing came from the API server past the idle deadline")),
      backoff_waits(registry_->counter("kinformer_backoff_waits_total", "Waits before a retry")),
      budget_denials(registry_->counter("kinformer_reconnect_budget_denials_total",
                                        "Reconnects delayed by the reconnect budget")),
      watch_list_fallbacks(registry_->counter(
          "kinformer_watch_list_fallbacks_total",
          "WatchList syncs that fell back to LIST (reason=refused|initial_events_timeout)")),
      requests(registry_->counter(
          "kinformer_requests_total",
          "LIST pages and watch openings the reflector requested (verb=list|watch)")),
      request_errors(registry_->counter("kinformer_request_errors_total",
                                        "Failed LIST pages and watch openings by verb and reason "
                                        "(unauthorized, forbidden, network, ...)")),
      handlers(registry_->gauge("kinformer_registered_handlers",
                                "Open registrations (reference count)")),
      queue_depth(registry_->gauge("kinformer_handler_queue_depth",
                                   "Pending notifications per handler, after coalescing")),
      delivery_lag(registry_->histogram("kinformer_handler_delivery_lag_seconds",
                                        "Enqueue to callback start", lag_buckets())),
      stalled_since(registry_->gauge("kinformer_handler_stalled_since_seconds",
                                     "Unix time the running callback started; 0 when idle")),
      handler_exceptions(registry_->counter("kinformer_handler_exceptions_total",
                                            "Exceptions thrown by handler callbacks")) {}

InformerMetrics::InformerMetrics(std::shared_ptr<Metrics> fp, const std::string& resource,
                                 const std::string& ns, const std::string& selector)
    : open_watches(fp->open_watches.add(
          {{"resource", resource}, {"namespace", ns}, {"selector", selector}})),
      watch_starts(fp->watch_starts.add(
          {{"resource", resource}, {"namespace", ns}, {"selector", selector}})),
      restarts_timeout(fp->watch_restarts.add({{"resource", resource},
                                               {"namespace", ns},
                                               {"selector", selector},
                                               {"reason", "timeout"}})),
      restarts_expired(fp->watch_restarts.add({{"resource", resource},
                                               {"namespace", ns},
                                               {"selector", selector},
                                               {"reason", "expired"}})),
      restarts_error(fp->watch_restarts.add({{"resource", resource},
                                             {"namespace", ns},
                                             {"selector", selector},
                                             {"reason", "error"}})),
      restarts_idle(fp->watch_restarts.add(
          {{"resource", resource}, {"namespace", ns}, {"selector", selector}, {"reason", "idle"}})),
      restarts_shutdown(fp->watch_restarts.add({{"resource", resource},
                                                {"namespace", ns},
                                                {"selector", selector},
                                                {"reason", "shutdown"}})),
      initial_lists(fp->lists.add({{"resource", resource},
                                   {"namespace", ns},
                                   {"selector", selector},
                                   {"kind", "initial"}})),
      relists(fp->lists.add(
          {{"resource", resource}, {"namespace", ns}, {"selector", selector}, {"kind", "relist"}})),
      list_duration(fp->list_duration.add(
          {{"resource", resource}, {"namespace", ns}, {"selector", selector}})),
      events_added(fp->events.add(
          {{"resource", resource}, {"namespace", ns}, {"selector", selector}, {"type", "ADDED"}})),
      events_modified(fp->events.add({{"resource", resource},
                                      {"namespace", ns},
                                      {"selector", selector},
                                      {"type", "MODIFIED"}})),
      events_deleted(fp->events.add({{"resource", resource},
                                     {"namespace", ns},
                                     {"selector", selector},
                                     {"type", "DELETED"}})),
      events_bookmark(fp->events.add({{"resource", resource},
                                      {"namespace", ns},
                                      {"selector", selector},
                                      {"type", "BOOKMARK"}})),
      objects(fp->objects.add({{"resource", resource}, {"namespace", ns}, {"selector", selector}})),
      last_sync_timestamp(fp->last_sync_timestamp.add(
          {{"resource", resource}, {"namespace", ns}, {"selector", selector}})),
      last_contact_timestamp(fp->last_contact_timestamp.add(
          {{"resource", resource}, {"namespace", ns}, {"selector", selector}})),
      stale_state(
          fp->stale.add({{"resource", resource}, {"namespace", ns}, {"selector", selector}})),
      backoff_waits(fp->backoff_waits.add(
          {{"resource", resource}, {"namespace", ns}, {"selector", selector}})),
      budget_denials(fp->budget_denials.add(
          {{"resource", resource}, {"namespace", ns}, {"selector", selector}})),
      watch_list_fallbacks_refused(fp->watch_list_fallbacks.add({{"resource", resource},
                                                                 {"namespace", ns},
                                                                 {"selector", selector},
                                                                 {"reason", "refused"}})),
      watch_list_fallbacks_timeout(
          fp->watch_list_fallbacks.add({{"resource", resource},
                                        {"namespace", ns},
                                        {"selector", selector},
                                        {"reason", "initial_events_timeout"}})),
      handlers(
          fp->handlers.add({{"resource", resource}, {"namespace", ns}, {"selector", selector}})),
      list_requests(fp->requests.add(
          {{"resource", resource}, {"namespace", ns}, {"selector", selector}, {"verb", "list"}})),
      watch_requests(fp->requests.add(
          {{"resource", resource}, {"namespace", ns}, {"selector", selector}, {"verb", "watch"}})),
      keep_(std::move(fp)),
      labels_{{"resource", resource}, {"namespace", ns}, {"selector", selector}} {}

void InformerMetrics::watch_opened() {
  watch_starts.increment();
  open_watches.increment();
}

void InformerMetrics::watch_closed() { open_watches.decrement(); }

void InformerMetrics::contacted() { last_contact_timestamp.set(detail::unix_now()); }

void InformerMetrics::stale(bool is_stale) { stale_state.set(is_stale ? 1 : 0); }

void InformerMetrics::watch_ended(WatchRestartReason reason) {
  switch (reason) {
    case WatchRestartReason::timeout:
      restarts_timeout.increment();
      break;
    case WatchRestartReason::expired:
      restarts_expired.increment();
      break;
    case WatchRestartReason::error:
    case WatchRestartReason::too_short:
      restarts_error.increment();
      break;
    case WatchRestartReason::idle:
      restarts_idle.increment();
      break;
    case WatchRestartReason::shutdown:
      restarts_shutdown.increment();
      break;
    case WatchRestartReason::no_initial_events_end:
    case WatchRestartReason::initial_events_timeout:
      break;  // WatchList fallbacks, counted there
  }
}

void InformerMetrics::event(client::EventType type) {
  switch (type) {
    case client::EventType::added:
      events_added.increment();
      break;
    case client::EventType::modified:
      events_modified.increment();
      break;
    case client::EventType::deleted:
      events_deleted.increment();
      break;
    case client::EventType::bookmark:
      events_bookmark.increment();
      break;
  }
}

void InformerMetrics::synced(bool initial, double seconds) {
  (initial ? initial_lists : relists).increment();
  list_duration.observe(seconds);
}

void InformerMetrics::backoff_waited() { backoff_waits.increment(); }

void InformerMetrics::budget_denied() { budget_denials.increment(); }

void InformerMetrics::watch_list_fell_back(WatchListFallback why) {
  (why == WatchListFallback::initial_events_timeout ? watch_list_fallbacks_timeout
                                                    : watch_list_fallbacks_refused)
      .increment();
}

Counter& InformerMetrics::request_errors(std::string_view verb, std::string_view reason) {
  return keep_->request_errors.add(
      with(with(labels_, "verb", std::string(verb)), "reason", std::string(reason)));
}

HandlerMetrics::HandlerMetrics(InformerMetrics& informer, const std::string& name, std::uint64_t id)
    : queue_depth(informer.families().queue_depth.add(
          with(with(informer.labels(), "handler", name), "id", std::to_string(id)))),
      delivery_lag(informer.families().delivery_lag.add(
          with(with(informer.labels(), "handler", name), "id", std::to_string(id)))),
      stalled_since(informer.families().stalled_since.add(
          with(with(informer.labels(), "handler", name), "id", std::to_string(id)))),
      exceptions(informer.families().handler_exceptions.add(
          with(with(informer.labels(), "handler", name), "id", std::to_string(id)))),
      families_(informer.families()) {}

HandlerMetrics::~HandlerMetrics() {
  families_.queue_depth.remove(&queue_depth);
  families_.delivery_lag.remove(&delivery_lag);
  families_.stalled_since.remove(&stalled_since);
  families_.handler_exceptions.remove(&exceptions);
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
