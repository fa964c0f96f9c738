#include "kinformer/client/uid.h"

#include <cstring>
#include <limits>
#include <ostream>
#include <stdexcept>

namespace kinformer::client {

namespace {

constexpr std::string_view kHex = "0123456789abcdef";

int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;  // upper case is not canonical: kept as text, so it reads back as sent
}

bool is_dash_at(std::size_t i) noexcept { return i == 8 || i == 13 || i == 18 || i == 23; }

// The 16 bytes of a canonical lower-case UUID text, or false.
bool parse_uuid(std::string_view text, std::uint64_t& hi, std::uint64_t& lo) noexcept {
  if (text.size() != 36) return false;
  std::uint64_t half[2] = {0, 0};
  int nibbles = 0;
  for (std::size_t i = 0; i < 36; ++i) {
    if (is_dash_at(i)) {
      if (text[i] != '-') return false;
      continue;
    }
    const int v = hex_value(text[i]);
    if (v < 0) return false;
    std::uint64_t& h = half[nibbles / 16];
    h = h << 4 | static_cast<std::uint64_t>(v);
    ++nibbles;
  }
  hi = half[0];
  lo = half[1];
  return true;
}

char* make_block(std::string_view text) {
  if (text.size() > std::numeric_limits<std::uint32_t>::max()) {
    throw std::length_error("Uid: text beyond 4 GiB");
  }
  const auto n = static_cast<std::uint32_t>(text.size());
  char* block = new char[sizeof n + text.size()];
  std::memcpy(block, &n, sizeof n);
  std::memcpy(block + sizeof n, text.data(), text.size());
  return block;
}

}  // namespace

Uid::Uid(std::string_view text) {
  if (text.empty()) return;
  std::uint64_t hi = 0;
  std::uint64_t lo = 0;
  // The RFC 4122 variant (10 in the top bits of byte 8) never reads as kText or empty.
  if (parse_uuid(text, hi, lo) && (lo >> 62) == 2) {
    hi_ = hi;
    lo_ = lo;
    return;
  }
  block_ = make_block(text);
  lo_ = kText;
}

Uid::Uid(const Uid& other) : lo_(other.lo_) {
  if (other.is_text()) {
    block_ = make_block(other.text());
  } else {
    hi_ = other.hi_;
  }
}

void Uid::take(Uid& other) noexcept {
  if (other.is_text()) {
    block_ = other.block_;
  } else {
    hi_ = other.hi_;
  }
  lo_ = other.lo_;
  other.hi_ = 0;
  other.lo_ = 0;
}

Uid& Uid::operator=(const Uid& other) {
  if (this != &other) *this = Uid(other);
  return *this;
}

Uid& Uid::operator=(Uid&& other) noexcept {
  if (this != &other) {
    release();
    take(other);
  }
  return *this;
}

void Uid::release() noexcept {
  if (is_text()) delete[] block_;
  hi_ = 0;
  lo_ = 0;
}

std::string_view Uid::text() const noexcept {
  std::uint32_t n = 0;
  std::memcpy(&n, block_, sizeof n);
  return {block_ + sizeof n, n};
}

std::string Uid::str() const {
  if (empty()) return {};
  if (is_text()) return std::string(text());
  std::string out;
  out.reserve(36);
  for (int i = 0; i < 32; ++i) {
    if (i == 8 || i == 12 || i == 16 || i == 20) out.push_back('-');
    const std::uint64_t half = i < 16 ? hi_ : lo_;
    out.push_back(kHex[(half >> (60 - 4 * (i % 16))) & 15]);
  }
  return out;
}

bool operator==(const Uid& a, const Uid& b) noexcept {
  if (a.is_text() != b.is_text()) return false;
  if (a.is_text()) return a.text() == b.text();
  return a.hi_ == b.hi_ && a.lo_ == b.lo_;
}

std::ostream& operator<<(std::ostream& os, const Uid& uid) { return os << uid.str(); }

}  // namespace kinformer::client
