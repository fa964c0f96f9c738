#pragma once
// LeaderElectionMetrics: one elector's series, with client-go's leader election metric names.

#include <memory>
#include <string>

#include "kinformer/informer/metrics_registry.h"

namespace kinformer::controller::detail {

struct LeaderElectionMetricFamilies;

/// The series of one elector, labelled name=<the Lease's name>, in the families of its registry
/// (registered once per registry, shared by every elector on it). Without a registry every call
/// is a no-op. The series are removed on destruction; two electors of one name on one registry
/// are refused (one series has one owner). Thread-safe (MetricsRegistry series are).
class LeaderElectionMetrics {
 public:
  /// `registry` null: no metrics. Throws client::ConfigError when an elector of that name
  /// already has series in `registry`. leader_election_master_status starts at 0.
  LeaderElectionMetrics(std::shared_ptr<informer::MetricsRegistry> registry, std::string name);
  ~LeaderElectionMetrics();
  LeaderElectionMetrics(const LeaderElectionMetrics&) = delete;
  LeaderElectionMetrics& operator=(const LeaderElectionMetrics&) = delete;

  /// leader_election_master_status: 1 while leading, 0 otherwise.
  void leading(bool on);
  /// leader_election_slowpath_total + 1: the leader had to read the Lease to renew it.
  void slowpath();

 private:
  /// Removes the series added so far (under families_by_backend().mu).
  void remove_series();

  std::shared_ptr<LeaderElectionMetricFamilies> families_;
  std::string name_;
  informer::Gauge* master_ = nullptr;
  informer::Counter* slowpath_ = nullptr;
};

}  // namespace kinformer::controller::detail
