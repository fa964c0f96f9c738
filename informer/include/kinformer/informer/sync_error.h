#pragma once
// SyncError: what keeps an informer from listing or watching (a 403, a revoked token ...), as
// the informer reports it (SharedInformer::last_error(), kinformer_request_errors_total).

#include <cstdint>
#include <string>
#include <string_view>

#include "kinformer/client/error.h"

namespace kinformer::informer {

/// A bounded, stable name for what went wrong with a request, used as the `reason` label of
/// kinformer_request_errors_total and in SyncError::reason. One of: "unauthorized" (401: the
/// credentials were rejected), "forbidden" (403: RBAC denies the verb), "not_found" (404),
/// "expired" (410 / Expired / Gone), "resource_version_too_large", "too_many_requests" (429),
/// "server_error" (other 5xx), "client_error" (other 4xx), "credentials" (the client could not
/// obtain credentials: unreadable token file, failing exec plugin), "network", "tls", "timeout",
/// "decode", "too_large", "truncated", "cancelled", "other".
[[nodiscard]] std::string_view error_reason(const client::Error& error) noexcept;

/// The latest failed request of an informer's reflector. Copyable value type; holds no secret
/// (client::Error never does).
struct SyncError {
  /// "list" (a LIST page) or "watch" (opening a watch, WatchList included).
  std::string verb;
  /// error_reason(error).
  std::string reason;
  /// What the client reported: code, HTTP status, the server's Status reason and message (e.g.
  /// `pods is forbidden: User "x" cannot list resource "pods" ... in the namespace "y"`).
  client::Error error;
  /// Failed requests in a row up to this one (any verb); reset by a request that succeeds.
  std::uint64_t consecutive = 0;

  /// One line for logs and status pages, e.g.
  /// "list forbidden (3 in a row): api 403 Forbidden: pods is forbidden: ...".
  [[nodiscard]] std::string to_string() const;
};

}  // namespace kinformer::informer
