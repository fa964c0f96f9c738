#include "work_queue_metrics.h"

#include <map>
#include <mutex>
#include <set>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "kinformer/client/error.h"

namespace kinformer::controller::detail {

// client-go's workqueue metrics (k8s.io/component-base/metrics/prometheus/workqueue), names,
// help and buckets alike, so dashboards made for client-go controllers work unchanged.
struct WorkQueueMetricFamilies {
  explicit WorkQueueMetricFamilies(std::shared_ptr<prometheus::Registry> r)
      : registry(std::move(r)),
        depth(prometheus::BuildGauge()
                  .Name("workqueue_depth")
                  .Help("Current depth of workqueue")
                  .Register(*registry)),
        adds(prometheus::BuildCounter()
                 .Name("workqueue_adds_total")
                 .Help("Total number of adds handled by workqueue")
                 .Register(*registry)),
        queue_duration(prometheus::BuildHistogram()
                           .Name("workqueue_queue_duration_seconds")
                           .Help("How long in seconds an item stays in workqueue before being "
                                 "requested.")
                           .Register(*registry)),
        work_duration(prometheus::BuildHistogram()
                          .Name("workqueue_work_duration_seconds")
                          .Help("How long in seconds processing an item from workqueue takes.")
                          .Register(*registry)),
        unfinished(prometheus::BuildGauge()
                       .Name("workqueue_unfinished_work_seconds")
                       .Help("How many seconds of work has done that is in progress and hasn't "
                             "been observed by work_duration. Large values indicate stuck "
                             "threads. One can deduce the number of stuck threads by observing "
                             "the rate at which this increases.")
                       .Register(*registry)),
        longest(prometheus::BuildGauge()
                    .Name("workqueue_longest_running_processor_seconds")
                    .Help("How many seconds has the longest running processor for workqueue "
                          "been running.")
                    .Register(*registry)),
        retries(prometheus::BuildCounter()
                    .Name("workqueue_retries_total")
                    .Help("Total number of retries handled by workqueue")
                    .Register(*registry)) {}

  std::shared_ptr<prometheus::Registry> registry;
  prometheus::Family<prometheus::Gauge>& depth;
  prometheus::Family<prometheus::Counter>& adds;
  prometheus::Family<prometheus::Histogram>& queue_duration;
  prometheus::Family<prometheus::Histogram>& work_duration;
  prometheus::Family<prometheus::Gauge>& unfinished;
  prometheus::Family<prometheus::Gauge>& longest;
  prometheus::Family<prometheus::Counter>& retries;
  std::set<std::string> names;  // guarded by families_mu(): the queues that have series here
};

namespace {

// Guards the map below and every WorkQueueMetricFamilies::names.
std::mutex& families_mu() {
  static std::mutex mu;
  return mu;
}

// The families of each registry, while some queue uses them (they keep the registry alive, so
// an address is never reused while its entry is live).
std::map<prometheus::Registry*, std::weak_ptr<WorkQueueMetricFamilies>>& families_by_registry() {
  static std::map<prometheus::Registry*, std::weak_ptr<WorkQueueMetricFamilies>> map;
  return map;
}

// 10 ns to 10 s, ten buckets: client-go's ExponentialBuckets(10e-9, 10, 10).
const prometheus::Histogram::BucketBoundaries& duration_buckets() {
  static const prometheus::Histogram::BucketBoundaries buckets = [] {
    prometheus::Histogram::BucketBoundaries b;
    double bound = 10e-9;
    for (int i = 0; i < 10; ++i, bound *= 10) b.push_back(bound);
    return b;
  }();
  return buckets;
}

}  // namespace

WorkQueueMetrics::WorkQueueMetrics(std::shared_ptr<prometheus::Registry> registry, std::string name)
    : name_(std::move(name)) {
  if (!registry) return;
  if (name_.empty()) {
    throw client::ConfigError("WorkQueue: metrics need a queue name (WorkQueueOptions::name)");
  }
  std::lock_guard lock(families_mu());
  auto& weak = families_by_registry()[registry.get()];
  families_ = weak.lock();
  if (!families_) {
    families_ = std::make_shared<WorkQueueMetricFamilies>(std::move(registry));
    weak = families_;
  }
  if (!families_->names.insert(name_).second) {
    throw client::ConfigError("WorkQueue: a queue named \"" + name_ +
                              "\" already has metrics in this registry; give each queue its "
                              "own name (WorkQueueOptions::name)");
  }
  const std::map<std::string, std::string> labels{{"name", name_}};
  depth_ = &families_->depth.Add(labels);
  adds_ = &families_->adds.Add(labels);
  queue_duration_ = &families_->queue_duration.Add(labels, duration_buckets());
  work_duration_ = &families_->work_duration.Add(labels, duration_buckets());
  unfinished_ = &families_->unfinished.Add(labels);
  longest_ = &families_->longest.Add(labels);
  retries_ = &families_->retries.Add(labels);
}

WorkQueueMetrics::~WorkQueueMetrics() {
  if (!families_) return;
  std::lock_guard lock(families_mu());
  families_->depth.Remove(depth_);
  families_->adds.Remove(adds_);
  families_->queue_duration.Remove(queue_duration_);
  families_->work_duration.Remove(work_duration_);
  families_->unfinished.Remove(unfinished_);
  families_->longest.Remove(longest_);
  families_->retries.Remove(retries_);
  families_->names.erase(name_);
  auto& map = families_by_registry();
  auto it = map.find(families_->registry.get());
  if (families_.use_count() == 1 && it != map.end()) map.erase(it);
}

void WorkQueueMetrics::added(std::size_t depth) {
  if (!families_) return;
  adds_->Increment();
  depth_->Set(static_cast<double>(depth));
}

void WorkQueueMetrics::taken(std::size_t depth, double queued_seconds) {
  if (!families_) return;
  depth_->Set(static_cast<double>(depth));
  queue_duration_->Observe(queued_seconds);
}

void WorkQueueMetrics::done(double work_seconds) {
  if (families_) work_duration_->Observe(work_seconds);
}

void WorkQueueMetrics::retried() {
  if (families_) retries_->Increment();
}

void WorkQueueMetrics::depth(std::size_t depth) {
  if (families_) depth_->Set(static_cast<double>(depth));
}

void WorkQueueMetrics::unfinished(double total_seconds, double longest_seconds) {
  if (!families_) return;
  unfinished_->Set(total_seconds);
  longest_->Set(longest_seconds);
}

}  // namespace kinformer::controller::detail
