#pragma once
// Rendering of `kwatch clusters` and `kwatch endpoints` (pure: tests check the text).

#include <string>
#include <vector>

#include "kinformer/mesh/cluster_registry.h"
#include "kinformer/mesh/endpoint_index.h"

namespace kinformer::tools {

/// One row of `kwatch clusters`.
struct ClusterRow {
  mesh::ClusterStatus status;
  /// This process's watches on that cluster (one per informer).
  std::size_t process_watches = 0;
  /// The server's open WATCH requests (its /metrics); -1 when it could not be read, with why.
  long server_watches = -1;
  std::string server_watches_error;
};

/// CLUSTER STATE SECRET WATCHES(process) SERVER-WATCHES REASON, one line per cluster.
std::string render_clusters_table(const std::vector<ClusterRow>& rows);
/// {"clusters":[{"id","local","state","reason","secret","generation","process_watches","server_watches"}]}
std::string render_clusters_json(const std::vector<ClusterRow>& rows);

/// A header line (snapshot version, service, port, subset), then one row per endpoint per
/// cluster shard: CLUSTER ADDRESS PORT READY SERVING TERMINATING ZONE. A shard without endpoints
/// is one explicit "(empty)" row; a cluster without a shard has no row.
std::string render_endpoints_table(const mesh::EndpointSnapshot& snapshot);
/// One JSON object (one line): {"version","service","port","subset","clusters":[{"cluster",
/// "endpoints":[{"address","port","ready","serving","terminating","zone","node"}]}]}.
std::string render_endpoints_json(const mesh::EndpointSnapshot& snapshot);

}  // namespace kinformer::tools
