#include "work_queue_metrics.h"

#include <map>
#include <mutex>
#include <set>

#include "kinformer/informer/metrics_registry.h"

#include "families_by_backend.h"
#include "kinformer/client/error.h"

namespace kinformer::controller::detail {

namespace {

// 10 ns to 10 s, ten buckets: client-go's ExponentialBuckets(10e-9, 10, 10).
const std::vector<double>& duration_buckets() {
  static const std::vector<double> buckets = [] {
    std::vector<double> b;
    double bound = 10e-9;
    for (int i = 0; i < 10; ++i, bound *= 10) b.push_back(bound);
    return b;
  }();
  return buckets;
}

}  // namespace

// client-go's workqueue metrics (k8s.io/component-base/metrics/prometheus/workqueue), names,
// help and buckets alike, so dashboards made for client-go controllers work unchanged.
struct WorkQueueMetricFamilies {
  explicit WorkQueueMetricFamilies(std::shared_ptr<informer::MetricsRegistry> r)
      : registry(std::move(r)),
        depth(registry->gauge("workqueue_depth", "Current depth of workqueue")),
        adds(
            registry->counter("workqueue_adds_total", "Total number of adds handled by workqueue")),
        queue_duration(
            registry->histogram("workqueue_queue_duration_seconds",
                                "How long in seconds an item stays in workqueue before being "
                                "requested.",
                                duration_buckets())),
        work_duration(registry->histogram(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes.", duration_buckets())),
        unfinished(
            registry->gauge("workqueue_unfinished_work_seconds",
                            "How many seconds of work has done that is in progress and hasn't "
                            "been observed by work_duration. Large values indicate stuck "
                            "threads. One can deduce the number of stuck threads by observing "
                            "the rate at which this increases.")),
        longest(registry->gauge("workqueue_longest_running_processor_seconds",
                                "How many seconds has the longest running processor for workqueue "
                                "been running.")),
        retries(registry->counter("workqueue_retries_total",
                                  "Total number of retries handled by workqueue")) {}

  std::shared_ptr<informer::MetricsRegistry> registry;
  informer::GaugeFamily& depth;
  informer::CounterFamily& adds;
  informer::HistogramFamily& queue_duration;
  informer::HistogramFamily& work_duration;
  informer::GaugeFamily& unfinished;
  informer::GaugeFamily& longest;
  informer::CounterFamily& retries;
  std::set<std::string>
      names;  // guarded by families_by_backend().mu: the queues that have series here
};

namespace {

// The families of each registry backend, while some queue uses them.
// Never destroyed: a queue that outlives main() (a static one) still finds it.
detail::FamiliesByBackend<WorkQueueMetricFamilies>& families_by_backend() {
  static auto* families =  // NOLINT(cppcoreguidelines-owning-memory): intentionally leaked
      new detail::FamiliesByBackend<WorkQueueMetricFamilies>;
  return *families;
}

}  // namespace

WorkQueueMetrics::WorkQueueMetrics(std::shared_ptr<informer::MetricsRegistry> registry,
                                   std::string name)
    : name_(std::move(name)) {
  // The null registry keeps nothing: no series, so no names to keep apart.
  if (!registry || registry == informer::MetricsRegistry::null()) return;
  if (name_.empty()) {
    throw client::ConfigError("WorkQueue: metrics need a queue name (WorkQueueOptions::name)");
  }
  // Made before the name is taken: nothing may throw between taking it and the try below.
  const std::map<std::string, std::string> labels{{"name", name_}};
  auto& by_backend = families_by_backend();
  std::lock_guard lock(by_backend.mu);
  families_ = by_backend.acquire(std::move(registry), name_);
  if (!families_) {
    throw client::ConfigError("WorkQueue: a queue named \"" + name_ +
                              "\" already has metrics in this registry; give each queue its "
                              "own name (WorkQueueOptions::name)");
  }
  try {
    depth_ = &families_->depth.add(labels);
    adds_ = &families_->adds.add(labels);
    queue_duration_ = &families_->queue_duration.add(labels);
    work_duration_ = &families_->work_duration.add(labels);
    unfinished_ = &families_->unfinished.add(labels);
    longest_ = &families_->longest.add(labels);
    retries_ = &families_->retries.add(labels);
  } catch (...) {
    // A registry that refused a series: the queue is not made, and leaves neither the series
    // added so far nor its name behind.
    remove_series();
    by_backend.release(families_, name_);
    throw;
  }
}

WorkQueueMetrics::~WorkQueueMetrics() {
  if (!families_) return;
  auto& by_backend = families_by_backend();
  std::lock_guard lock(by_backend.mu);
  remove_series();
  by_backend.release(families_, name_);
}

void WorkQueueMetrics::remove_series() {
  if (depth_) families_->depth.remove(depth_);
  if (adds_) families_->adds.remove(adds_);
  if (queue_duration_) families_->queue_duration.remove(queue_duration_);
  if (work_duration_) families_->work_duration.remove(work_duration_);
  if (unfinished_) families_->unfinished.remove(unfinished_);
  if (longest_) families_->longest.remove(longest_);
  if (retries_) families_->retries.remove(retries_);
}

void WorkQueueMetrics::added(std::size_t depth) {
  if (!families_) return;
  adds_->increment();
  depth_->set(static_cast<double>(depth));
}

void WorkQueueMetrics::taken(std::size_t depth, double queued_seconds) {
  if (!families_) return;
  depth_->set(static_cast<double>(depth));
  queue_duration_->observe(queued_seconds);
}

void WorkQueueMetrics::done(double work_seconds) {
  if (families_) work_duration_->observe(work_seconds);
}

void WorkQueueMetrics::retried() {
  if (families_) retries_->increment();
}

void WorkQueueMetrics::depth(std::size_t depth) {
  if (families_) depth_->set(static_cast<double>(depth));
}

void WorkQueueMetrics::unfinished(double total_seconds, double longest_seconds) {
  if (!families_) return;
  unfinished_->set(total_seconds);
  longest_->set(longest_seconds);
}

}  // namespace kinformer::controller::detail
