#include "kinformer/client/api_error.h"

#include <algorithm>
#include <charconv>

#include "detail/json.h"

namespace kinformer::client {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() &&
         (s.front() == ' ' || s.front() == '\n' || s.front() == '\r' || s.front() == '\t')) {
    s.remove_prefix(1);
  }
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\n' || s.back() == '\r' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return s;
}

std::optional<std::chrono::seconds> parse_seconds(std::string_view s) {
  s = trim(s);
  long long v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec == std::errc::result_out_of_range && p == s.data() + s.size() && s.front() != '-') {
    return kMaxRetryAfter;  // all digits, just too many of them
  }
  if (ec != std::errc() || p != s.data() + s.size() || v < 0) return std::nullopt;
  return std::min(std::chrono::seconds(v), kMaxRetryAfter);
}

void fill_from_status(const JsonValue& status, Error& e) {
  using detail::get_string;
  using detail::member;
  e.reason = get_string(status, "reason");
  e.message = get_string(status, "message");
  if (const JsonValue* d = member(status, "details")) {
    if (const JsonValue* r = member(*d, "retryAfterSeconds");
        r && r->IsInt64() && r->GetInt64() > 0) {
      e.retry_after = std::min(std::chrono::seconds(r->GetInt64()), kMaxRetryAfter);
    }
    if (const JsonValue* causes = member(*d, "causes"); causes && causes->IsArray()) {
      constexpr rapidjson::SizeType kMaxCauses = 16;  // bounded: a Status is untrusted input
      for (rapidjson::SizeType i = 0; i < causes->Size() && i < kMaxCauses; ++i) {
        const JsonValue& c = (*causes)[i];
        if (c.IsObject()) e.causes.emplace_back(get_string(c, "reason"));
      }
    }
  }
}

}  // namespace

Error error_from_status(const JsonValue& status) {
  Error e;
  e.code = Errc::api;
  std::int64_t code = detail::get_int(status, "code", 500);
  e.http_status = code > 0 ? static_cast<int>(code) : 500;
  fill_from_status(status, e);
  if (e.message.empty()) e.message = "watch ERROR event";
  return e;
}

Error error_from_response(int http_status, std::string_view body,
                          std::string_view retry_after_header) {
  Error e;
  e.code = Errc::api;
  e.http_status = http_status;
  std::string_view trimmed = trim(body);
  bool parsed = false;
  if (!trimmed.empty() && trimmed.front() == '{') {
    // The depth-limited parser (an error body comes from the server, or from a proxy).
    std::string text(trimmed);
    rapidjson::Document doc;
    if (!detail::parse_insitu(doc, text.data(), text.size()) && doc.IsObject() &&
        detail::get_string(doc, "kind") == "Status") {
      fill_from_status(doc, e);
      parsed = true;
    }
  }
  if (!parsed) {
    std::string_view head = trimmed;  // a BOM or other blanks do not hide JSON
    if (head.starts_with("\xEF\xBB\xBF")) head.remove_prefix(3);
    while (!head.empty() && (head.front() == '\f' || head.front() == '\v' || head.front() == ' ')) {
      head.remove_prefix(1);
    }
    if (!head.empty() && (head.front() == '{' || head.front() == '[')) {
      // JSON that is not a Status may be an API object (a proxy passing a Secret list on with an
      // odd status): its text would reach logs and last_error(). Only its size is kept.
      e.message = "HTTP " + std::to_string(http_status) +
                  " with a JSON body that is not a Status (" + std::to_string(trimmed.size()) +
                  " bytes)";
    } else {
      constexpr std::size_t kMaxMessage = 1024;
      e.message = std::string(trimmed.substr(0, kMaxMessage));  // a proxy's text or HTML page
    }
    if (http_status == 429) e.reason = "TooManyRequests";
  }
  if (auto header = parse_seconds(retry_after_header)) e.retry_after = header;
  if (e.message.empty()) e.message = "HTTP " + std::to_string(http_status);
  return e;
}

}  // namespace kinformer::client
