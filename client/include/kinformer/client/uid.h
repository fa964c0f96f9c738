#pragma once
// Uid: an object's metadata.uid in 24 bytes and no heap block.

#include <array>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <string_view>

#include "kinformer/client/interned_string.h"

namespace kinformer::client {

/// A UID as the API server assigns it: a UUID in its canonical lowercase text
/// ("0b6a3c1e-8f2d-4e7a-9c55-1d2e3f4a5b6c"), held as its 16 bytes. Any other text (a scripted
/// server's "uid-1", upper case) is kept as it was sent, so reading a Uid always gives back the
/// text the server sent. Thread-safety: a value type.
class Uid {
 public:
  Uid() noexcept = default;
  Uid(std::string_view text);  // NOLINT(google-explicit-constructor): a string field
  Uid(const std::string& text) : Uid(std::string_view(text)) {}  // NOLINT: as above
  Uid(const char* text) : Uid(std::string_view(text)) {}         // NOLINT: as above
  Uid(std::nullptr_t) = delete;

  [[nodiscard]] bool empty() const noexcept { return text_.empty() && bytes_ == Bytes{}; }
  /// The text the server sent.
  [[nodiscard]] std::string str() const;

  /// Equal when the texts are equal (a string compares as the Uid it reads as).
  friend bool operator==(const Uid& a, const Uid& b) noexcept {
    return a.bytes_ == b.bytes_ && a.text_ == b.text_;
  }

 private:
  using Bytes = std::array<std::uint8_t, 16>;
  // A canonical UUID other than the nil one: its bytes, and text_ empty. Any other text
  // (the nil UUID too, so that all-zero bytes mean empty): text_, unpooled (UIDs are unique per
  // object, sharing would save nothing).
  Bytes bytes_{};
  InternedString text_;
};

std::ostream& operator<<(std::ostream& os, const Uid& uid);

}  // namespace kinformer::client

template <>
struct std::hash<kinformer::client::Uid> {
  std::size_t operator()(const kinformer::client::Uid& u) const noexcept {
    return std::hash<std::string>{}(u.str());
  }
};
