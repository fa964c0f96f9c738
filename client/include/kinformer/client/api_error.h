#pragma once
// Mapping API server failure responses (metav1.Status bodies, plain-text 429s) to Error.

#include <chrono>
#include <string_view>

#include "kinformer/client/error.h"
#include "kinformer/client/resource.h"

namespace kinformer::client {

/// The longest wait a server can ask for (Retry-After, retryAfterSeconds); larger values are
/// clamped. API Priority and Fairness asks for 1 to 32 s; without a cap a broken server or proxy
/// could park an informer for days, or overflow a clock's duration.
inline constexpr std::chrono::seconds kMaxRetryAfter{300};

/// Maps a non-2xx HTTP response to an Errc::api Error. A metav1.Status JSON body supplies
/// code, reason, message and details.retryAfterSeconds; any other body (API Priority and
/// Fairness sends plain text with 429) becomes the message, trimmed and capped at 1 KiB. The
/// `retry_after_header` (delta-seconds) wins over the Status detail when both are present.
/// The returned http_status is always `http_status`.
Error error_from_response(int http_status, std::string_view body,
                          std::string_view retry_after_header = {});

/// Maps a metav1.Status object (the object of a watch ERROR event) to an Errc::api Error whose
/// http_status is the Status "code" (500 when missing).
Error error_from_status(const JsonValue& status);

}  // namespace kinformer::client
