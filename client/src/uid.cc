#include "kinformer/client/uid.h"

#include <ostream>

namespace kinformer::client {

namespace {

constexpr std::string_view kHex = "0123456789abcdef";

int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;  // upper case is not canonical: kept as text, so it reads back as sent
}

bool is_dash_at(std::size_t i) noexcept { return i == 8 || i == 13 || i == 18 || i == 23; }

}  // namespace

Uid::Uid(std::string_view text) {
  if (text.empty()) return;
  if (text.size() == 36) {
    Bytes b{};
    std::size_t out = 0;
    bool ok = true;
    for (std::size_t i = 0; i < 36 && ok; ++i) {
      if (is_dash_at(i)) {
        ok = text[i] == '-';
        continue;
      }
      const int hi = hex_value(text[i]);
      const int lo = i + 1 < 36 ? hex_value(text[i + 1]) : -1;
      ok = hi >= 0 && lo >= 0;
      if (ok) b[out++] = static_cast<std::uint8_t>(hi << 4 | lo);
      ++i;
    }
    if (ok && out == 16 && b != Bytes{}) {
      bytes_ = b;
      return;
    }
  }
  text_ = InternedString::unpooled(text);
}

std::string Uid::str() const {
  if (!text_.empty() || bytes_ == Bytes{}) return text_.str();
  std::string out;
  out.reserve(36);
  for (std::size_t i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out.push_back('-');
    out.push_back(kHex[bytes_[i] >> 4]);
    out.push_back(kHex[bytes_[i] & 15]);
  }
  return out;
}

std::ostream& operator<<(std::ostream& os, const Uid& uid) { return os << uid.str(); }

}  // namespace kinformer::client
