#pragma once
// Errors on kinformer's I/O paths. Runtime failures are values (never thrown across an async
// boundary); configuration errors throw ConfigError at construction.

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace kinformer::client {

/// What went wrong, coarsely; `Error` carries the details. Registered as a std::error_code
/// category ("kinformer") so that async paths can pass plain error_codes.
enum class Errc {
  ok = 0,
  /// Could not resolve or connect, or the connection broke outside a watch stream.
  network = 1,
  /// TLS handshake or certificate verification failed (message says why: unknown CA,
  /// hostname mismatch, expired certificate, client certificate required).
  tls = 2,
  /// A request or step exceeded its deadline.
  timeout = 3,
  /// The operation was cancelled by its owner (stop/shutdown). Never retried.
  cancelled = 4,
  /// The API server answered with a non-2xx status; `Error::http_status` and the Status fields
  /// say which (401, 403, 404, 409, 410, 429, 5xx ...).
  api = 5,
  /// A response body, watch line or object could not be decoded (malformed JSON, wrong shape).
  decode = 6,
  /// A watch event or response exceeded the configured size limit.
  too_large = 7,
  /// A watch stream ended in the middle of an event, or a response body was cut short.
  truncated = 8,
  /// Credentials could not be obtained (token file unreadable, exec plugin failed).
  auth = 9,
};

/// The std::error_category for Errc.
const std::error_category& error_category() noexcept;
inline std::error_code make_error_code(Errc e) noexcept {
  return {static_cast<int>(e), error_category()};
}

/// A failed request, watch or decode. Copyable value type. Never contains a token, key or Secret
/// data: messages name what was wrong, not the secret values.
struct Error {
  Errc code = Errc::ok;
  /// HTTP status for Errc::api (and for watch ERROR events: the Status "code").
  int http_status = 0;
  /// Status.reason from the API server ("Expired", "Gone", "Forbidden", "TooManyRequests", ...).
  std::string reason;
  /// Human-readable message: the server's Status.message, or ours.
  std::string message;
  /// Retry-After header or Status.details.retryAfterSeconds, when the server gave one.
  std::optional<std::chrono::seconds> retry_after;
  /// Status.details.causes[].reason (the cause types, e.g. "ResourceVersionTooLarge",
  /// "FieldValueInvalid"), in the server's order; empty when the Status had none.
  std::vector<std::string> causes;

  /// 410 Gone / reason Expired: the resourceVersion (or continue token) is too old; relist.
  [[nodiscard]] bool is_expired() const noexcept {
    return http_status == 410 || reason == "Expired" || reason == "Gone";
  }
  /// 429 Too Many Requests (API Priority and Fairness).
  [[nodiscard]] bool is_too_many_requests() const noexcept { return http_status == 429; }
  /// The Status carried a cause of type `type`.
  [[nodiscard]] bool has_cause(std::string_view type) const noexcept;
  /// "Too large resource version" (e.g. a relist at an RV newer than etcd's after a restore): a
  /// Status cause of type ResourceVersionTooLarge, or, from servers before 1.19 that set no cause
  /// type, a 504 / reason Timeout whose message says "Too large resource version". A plain 504
  /// Timeout (with or without a retry-after) is not.
  [[nodiscard]] bool is_resource_version_too_large() const noexcept;
  /// One line, e.g. "api 403 Forbidden: secrets is forbidden: User ... cannot list ...".
  [[nodiscard]] std::string to_string() const;

  static Error make(Errc code, std::string message) {
    Error e;
    e.code = code;
    e.message = std::move(message);
    return e;
  }
};

/// Thrown at construction for configuration problems (kubeconfig, options). The message names the
/// file, the entry and the field, e.g. "kubeconfig /x/config: user 'admin': client-key-data is not
/// valid base64". Never contains a secret value.
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace kinformer::client

template <>
struct std::is_error_code_enum<kinformer::client::Errc> : std::true_type {};
