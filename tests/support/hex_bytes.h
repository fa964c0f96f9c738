#pragma once
// Bytes written as RFCs print them: "8286 8441" -> 82 86 84 41 (spaces ignored, lower-case hex).
#include <string>
#include <string_view>

namespace kinformer::testing {

inline std::string hex_bytes(std::string_view hex) {
  std::string out;
  int high = -1;
  for (const char c : hex) {
    if (c == ' ') continue;
    const int v = c <= '9' ? c - '0' : c - 'a' + 10;
    if (high < 0) {
      high = v;
    } else {
      out.push_back(static_cast<char>(high * 16 + v));
      high = -1;
    }
  }
  return out;
}

}  // namespace kinformer::testing
