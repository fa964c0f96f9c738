#include "kinformer/client/error.h"

namespace kinformer::client {
namespace {

class Category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "kinformer"; }
  std::string message(int value) const override {
    switch (static_cast<Errc>(value)) {
      case Errc::ok:
        return "ok";
      case Errc::network:
        return "network";
      case Errc::tls:
        return "tls";
      case Errc::timeout:
        return "timeout";
      case Errc::cancelled:
        return "cancelled";
      case Errc::api:
        return "api";
      case Errc::decode:
        return "decode";
      case Errc::too_large:
        return "too large";
      case Errc::truncated:
        return "truncated";
      case Errc::auth:
        return "auth";
    }
    return "unknown";
  }
};

}  // namespace

const std::error_category& error_category() noexcept {
  static const Category category;
  return category;
}

bool Error::has_cause(std::string_view type) const noexcept {
  for (const auto& c : causes) {
    if (c == type) return true;
  }
  return false;
}

bool Error::is_resource_version_too_large() const noexcept {
  if (has_cause("ResourceVersionTooLarge")) return true;
  return (http_status == 504 || reason == "Timeout") &&
         message.find("Too large resource version") != std::string::npos;
}

std::string Error::to_string() const {
  std::string out = make_error_code(code).message();
  if (http_status != 0) out += " " + std::to_string(http_status);
  if (!reason.empty()) out += " " + reason;
  if (!message.empty()) out += ": " + message;
  if (retry_after) out += " (retry after " + std::to_string(retry_after->count()) + "s)";
  return out;
}

}  // namespace kinformer::client
