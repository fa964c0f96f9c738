#pragma once
// WorkQueueMetrics: one work queue's series, with client-go's workqueue metric names.

#include <memory>
#include <string>

#include "kinformer/informer/metrics_registry.h"

namespace kinformer::controller::detail {

struct WorkQueueMetricFamilies;

/// The series of one queue, labelled name=<the queue's name>, in the families of its registry
/// (registered once per registry, shared by every queue on it). Without a registry every call is
/// a no-op. The series are removed on destruction; two queues of one name on one registry are
/// refused (one series has one owner). Thread-safe (MetricsRegistry series are).
class WorkQueueMetrics {
 public:
  /// `registry` null: no metrics. Throws client::ConfigError when `name` is empty or a queue of
  /// that name already has series in `registry`.
  WorkQueueMetrics(std::shared_ptr<informer::MetricsRegistry> registry, std::string name);
  ~WorkQueueMetrics();
  WorkQueueMetrics(const WorkQueueMetrics&) = delete;
  WorkQueueMetrics& operator=(const WorkQueueMetrics&) = delete;

  /// A key became waiting to be processed: workqueue_adds_total + 1, depth set to `depth`.
  void added(std::size_t depth);
  /// A key was handed out after `queued_seconds` in the queue; depth set to `depth`.
  void taken(std::size_t depth, double queued_seconds);
  /// A key's processing ended after `work_seconds`.
  void done(double work_seconds);
  /// workqueue_retries_total + 1 (each add_after(), as in client-go).
  void retried();
  /// The queue dropped its keys (shutdown): depth set to `depth`.
  void depth(std::size_t depth);
  /// The work in progress: the sum of the running processors' times, and the longest one.
  void unfinished(double total_seconds, double longest_seconds);

 private:
  /// Removes the series added so far (under families_by_backend().mu).
  void remove_series();

  std::shared_ptr<WorkQueueMetricFamilies> families_;
  std::string name_;
  informer::Gauge* depth_ = nullptr;
  informer::Counter* adds_ = nullptr;
  informer::Histogram* queue_duration_ = nullptr;
  informer::Histogram* work_duration_ = nullptr;
  informer::Gauge* unfinished_ = nullptr;
  informer::Gauge* longest_ = nullptr;
  informer::Counter* retries_ = nullptr;
};

}  // namespace kinformer::controller::detail
