#pragma once
// Private: strict standard base64 decoding (whitespace ignored, padding optional).

#include <openssl/crypto.h>

#include <optional>
#include <string>
#include <string_view>

namespace kinformer::client::detail {

inline std::optional<std::string> base64_decode(std::string_view in) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  out.reserve(in.size() * 3 / 4);  // the most it can be: out never moves while it grows
  // The input may be Secret data or a private key: what was decoded before a failure is wiped.
  struct WipeUnlessKept {
    std::string& out;
    bool keep = false;
    ~WipeUnlessKept() {
      if (!keep && !out.empty()) OPENSSL_cleanse(out.data(), out.size());
    }
  } guard{out};
  unsigned buffer = 0;
  int bits = 0;
  std::size_t padding = 0;
  for (char c : in) {
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
    if (c == '=') {
      ++padding;
      continue;
    }
    if (padding > 0) return std::nullopt;  // data after padding
    int v = value(c);
    if (v < 0) return std::nullopt;
    buffer = (buffer << 6) | static_cast<unsigned>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((buffer >> bits) & 0xff));
    }
  }
  if (bits >= 6 || padding > 2) return std::nullopt;  // a dangling 6-bit group is invalid
  if (bits > 0 && (buffer & ((1u << bits) - 1)) != 0) {
    return std::nullopt;  // non-canonical tail bits
  }
  guard.keep = true;
  return out;
}

}  // namespace kinformer::client::detail
