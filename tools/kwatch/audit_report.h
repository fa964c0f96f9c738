#pragma once
// `kwatch audit`'s logic on a /metrics response: the table, the JSON document, the
// --max-watches check and the error messages. Pure functions, so tests feed fake responses.

#include <ostream>
#include <string>
#include <vector>

#include "cli.h"
#include "kinformer/client/rest_client.h"
#include "watch_audit.h"

namespace kinformer::tools {

/// "RESOURCE WATCHES" table: a header line naming the metric used, one row per resource (most
/// watches first) and a TOTAL row.
std::string format_audit_table(const WatchAudit& audit);

/// One JSON document: {"source":...,"total":N,"resources":[{"resource":...,"count":N},...]}.
std::string format_audit_json(const WatchAudit& audit);

/// The resources with more than `max_watches` open watches (in audit order).
std::vector<WatchCount> over_limit(const WatchAudit& audit, long max_watches);

/// Why /metrics could not be used, as one sentence; "" when `response` is a 200.
/// `server` names the API server in messages (ClusterConfig::server).
std::string metrics_failure(const client::Result<client::RawResponse>& response,
                            const std::string& server);

/// The whole audit after GET /metrics: prints the table or JSON to `out`, problems to `err`
/// (key=value log lines), and returns the exit status: 0, 1 (--max-watches exceeded) or 2
/// (/metrics unreadable, unparsable, or without either watch metric family).
int run_audit_on(const client::Result<client::RawResponse>& response, const AuditOptions& options,
                 const std::string& server, std::ostream& out, std::ostream& err);

}  // namespace kinformer::tools
