#pragma once
// base64 (RFC 4648, padded) for tests that write Secret data or inline kubeconfig fields.

#include <string>
#include <string_view>

namespace kinformer::testing {

inline std::string base64(std::string_view in) {
  static constexpr std::string_view kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  unsigned bits_value = 0;
  int bits = 0;
  for (unsigned char c : in) {
    bits_value = (bits_value << 8) | c;
    bits += 8;
    while (bits >= 6) out.push_back(kAlphabet[(bits_value >> (bits -= 6)) & 63]);
  }
  if (bits > 0) out.push_back(kAlphabet[(bits_value << (6 - bits)) & 63]);
  while (out.size() % 4 != 0) out.push_back('=');
  return out;
}

}  // namespace kinformer::testing
