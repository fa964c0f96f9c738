#include "kinformer/informer/sync_error.h"

namespace kinformer::informer {

std::string_view error_reason(const client::Error& e) noexcept {
  using client::Errc;
  switch (e.code) {
    case Errc::api:
      if (e.http_status == 401) return "unauthorized";
      if (e.http_status == 403) return "forbidden";
      if (e.http_status == 404) return "not_found";
      if (e.is_resource_version_too_large()) return "resource_version_too_large";
      if (e.is_expired()) return "expired";
      if (e.is_too_many_requests()) return "too_many_requests";
      if (e.http_status >= 500) return "server_error";
      if (e.http_status >= 400) return "client_error";
      return "other";
    case Errc::auth:
      return "credentials";
    case Errc::network:
      return "network";
    case Errc::tls:
      return "tls";
    case Errc::timeout:
      return "timeout";
    case Errc::decode:
      return "decode";
    case Errc::too_large:
      return "too_large";
    case Errc::truncated:
      return "truncated";
    case Errc::cancelled:
      return "cancelled";
    case Errc::ok:
      break;
  }
  return "other";
}

std::string SyncError::to_string() const {
  return verb + " " + reason + " (" + std::to_string(consecutive) +
         " in a row): " + error.to_string();
}

}  // namespace kinformer::informer
