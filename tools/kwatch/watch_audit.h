#pragma once
// Reads how many watches an API server holds open, per resource, from its /metrics text.
//
// Kubernetes 1.25+ exposes apiserver_longrunning_requests{verb="WATCH",group,version,resource,...}
// (a gauge); older servers expose apiserver_registered_watchers{group,version,kind}. The audit
// uses the first when present and says which one it used.

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace kinformer::tools {

/// One sample of the Prometheus text exposition format.
struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

/// Parses Prometheus text exposition (version 0.0.4). Comment and blank lines are skipped;
/// a malformed line throws std::runtime_error naming its line number.
std::vector<Sample> parse_prometheus_text(std::string_view text);

/// Open watches on one resource.
struct WatchCount {
  std::string group;  ///< "" for core
  std::string version;
  std::string resource;  ///< plural resource (longrunning_requests) or Kind (registered_watchers)
  long count = 0;
  /// "secrets", "discovery.k8s.io/v1/endpointslices".
  [[nodiscard]] std::string name() const;
};

struct WatchAudit {
  /// "apiserver_longrunning_requests" or "apiserver_registered_watchers"; empty when the metrics
  /// had neither family (then `counts` is empty).
  std::string source;
  /// One entry per resource with at least one series, sorted by count (descending), then name.
  std::vector<WatchCount> counts;
  [[nodiscard]] long total() const;
  /// Count for a resource as printed by WatchCount::name(); 0 when absent.
  [[nodiscard]] long count(std::string_view name) const;
};

/// Sums the server's open-watch series per resource.
WatchAudit audit_watches(std::string_view metrics_text);

}  // namespace kinformer::tools
