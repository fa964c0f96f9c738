#include "leader_election_metrics.h"

#include <map>
#include <mutex>
#include <set>

#include "kinformer/informer/metrics_registry.h"

#include "families_by_backend.h"
#include "kinformer/client/error.h"

namespace kinformer::controller::detail {

// client-go's leader election metrics (k8s.io/client-go/tools/leaderelection/metrics.go), names
// and help alike, so dashboards and alerts made for client-go controllers work unchanged.
struct LeaderElectionMetricFamilies {
  explicit LeaderElectionMetricFamilies(std::shared_ptr<informer::MetricsRegistry> r)
      : registry(std::move(r)),
        master(
            registry->gauge("leader_election_master_status",
                            "Gauge of if the reporting system is master of the relevant lease, 0 "
                            "indicates backup, 1 indicates master. 'name' is the string used to "
                            "identify the lease. Please make sure to group by name.")),
        slowpath(
            registry->counter("leader_election_slowpath_total",
                              "Total number of slow path exercised in renewing leader leases. "
                              "'name' is the string used to identify the lease. Please make sure "
                              "to group by name.")) {}

  std::shared_ptr<informer::MetricsRegistry> registry;
  informer::GaugeFamily& master;
  informer::CounterFamily& slowpath;
  std::set<std::string>
      names;  // guarded by families_by_backend().mu: the electors that have series here
};

namespace {

// The families of each registry backend, while some elector uses them.
// Never destroyed: an elector that outlives main() (a static one) still finds it.
detail::FamiliesByBackend<LeaderElectionMetricFamilies>& families_by_backend() {
  static auto* families =  // NOLINT(cppcoreguidelines-owning-memory): intentionally leaked
      new detail::FamiliesByBackend<LeaderElectionMetricFamilies>;
  return *families;
}

}  // namespace

LeaderElectionMetrics::LeaderElectionMetrics(std::shared_ptr<informer::MetricsRegistry> registry,
                                             std::string name)
    : name_(std::move(name)) {
  // The null registry keeps nothing: no series, so no names to keep apart.
  if (!registry || registry == informer::MetricsRegistry::null()) return;
  // Made before the name is taken: nothing may throw between taking it and the try below.
  const std::map<std::string, std::string> labels{{"name", name_}};
  auto& by_backend = families_by_backend();
  std::lock_guard lock(by_backend.mu);
  families_ = by_backend.acquire(std::move(registry), name_);
  if (!families_) {
    throw client::ConfigError("LeaderElectionOptions: an elector of the lease \"" + name_ +
                              "\" already has metrics in this registry (registry)");
  }
  try {
    master_ = &families_->master.add(labels);
    slowpath_ = &families_->slowpath.add(labels);
    master_->set(0);
  } catch (...) {
    // A registry that refused a series: the elector is not made, and leaves neither the series
    // added so far nor its name behind.
    remove_series();
    by_backend.release(families_, name_);
    throw;
  }
}

LeaderElectionMetrics::~LeaderElectionMetrics() {
  if (!families_) return;
  auto& by_backend = families_by_backend();
  std::lock_guard lock(by_backend.mu);
  remove_series();
  by_backend.release(families_, name_);
}

void LeaderElectionMetrics::remove_series() {
  if (master_) families_->master.remove(master_);
  if (slowpath_) families_->slowpath.remove(slowpath_);
}

void LeaderElectionMetrics::leading(bool on) {
  if (families_) master_->set(on ? 1 : 0);
}

void LeaderElectionMetrics::slowpath() {
  if (families_) slowpath_->increment();
}

}  // namespace kinformer::controller::detail
