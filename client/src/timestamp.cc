#include "kinformer/client/timestamp.h"

#include <cstdio>
#include <ostream>

namespace kinformer::client {

namespace {

// Reads exactly `n` digits at text[at...]; advances `at`.
bool digits(std::string_view text, std::size_t& at, int n, int& out) noexcept {
  if (at + static_cast<std::size_t>(n) > text.size()) return false;
  int v = 0;
  for (int i = 0; i < n; ++i) {
    const char c = text[at++];
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  out = v;
  return true;
}

bool expect(std::string_view text, std::size_t& at, char c) noexcept {
  if (at >= text.size() || text[at] != c) return false;
  ++at;
  return true;
}

}  // namespace

std::optional<Timestamp> Timestamp::from_unix_seconds(std::int64_t seconds) noexcept {
  if (seconds < kMinSeconds || seconds > kMaxSeconds) return std::nullopt;
  return Timestamp(seconds);
}

std::optional<Timestamp> Timestamp::parse(std::string_view text) noexcept {
  using namespace std::chrono;
  std::size_t at = 0;
  int y = 0;
  int mo = 0;
  int d = 0;
  int h = 0;
  int mi = 0;
  int s = 0;
  if (!digits(text, at, 4, y) || !expect(text, at, '-') || !digits(text, at, 2, mo) ||
      !expect(text, at, '-') || !digits(text, at, 2, d)) {
    return std::nullopt;
  }
  if (at >= text.size() || (text[at] != 'T' && text[at] != 't')) return std::nullopt;
  ++at;
  if (!digits(text, at, 2, h) || !expect(text, at, ':') || !digits(text, at, 2, mi) ||
      !expect(text, at, ':') || !digits(text, at, 2, s)) {
    return std::nullopt;
  }
  if (at < text.size() && text[at] == '.') {  // a fraction: at least one digit, dropped
    ++at;
    const std::size_t first = at;
    while (at < text.size() && text[at] >= '0' && text[at] <= '9') ++at;
    if (at == first) return std::nullopt;
  }
  int offset_s = 0;
  if (at < text.size() && (text[at] == 'Z' || text[at] == 'z')) {
    ++at;
  } else if (at < text.size() && (text[at] == '+' || text[at] == '-')) {
    const int sign = text[at++] == '+' ? 1 : -1;
    int oh = 0;
    int om = 0;
    if (!digits(text, at, 2, oh) || !expect(text, at, ':') || !digits(text, at, 2, om) || oh > 23 ||
        om > 59) {
      return std::nullopt;
    }
    offset_s = sign * (oh * 3600 + om * 60);
  } else {
    return std::nullopt;
  }
  if (at != text.size()) return std::nullopt;
  const year_month_day ymd{year(y), month(static_cast<unsigned>(mo)),
                           day(static_cast<unsigned>(d))};
  if (!ymd.ok() || h > 23 || mi > 59 || s > 59) return std::nullopt;  // no leap seconds, as Go
  const std::int64_t local = sys_days(ymd).time_since_epoch().count() * std::int64_t{86400} +
                             std::int64_t{h} * 3600 + std::int64_t{mi} * 60 + s;
  return from_unix_seconds(local - offset_s);
}

std::string Timestamp::to_string() const {
  if (empty()) return {};
  using namespace std::chrono;
  const sys_seconds t = time_point();
  const sys_days day = floor<days>(t);
  const year_month_day ymd{day};
  const hh_mm_ss hms{t - day};
  char text[32];
  std::snprintf(text, sizeof text, "%04d-%02u-%02uT%02d:%02d:%02dZ", static_cast<int>(ymd.year()),
                static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                static_cast<int>(hms.hours().count()), static_cast<int>(hms.minutes().count()),
                static_cast<int>(hms.seconds().count()));
  return text;
}

std::ostream& operator<<(std::ostream& os, Timestamp t) { return os << t.to_string(); }

}  // namespace kinformer::client
