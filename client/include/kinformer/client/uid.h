#pragma once
// Uid: an object's metadata.uid in 16 bytes (no heap block for the UUIDs the API server assigns).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <string_view>

namespace kinformer::client {

/// A UID as the API server assigns it: a random (RFC 4122) UUID in its canonical lower-case text
/// ("0b6a3c1e-8f2d-4e7a-9c55-1d2e3f4a5b6c"), held as its 16 bytes. Any other text (a scripted
/// server's "uid-1", upper case, another UUID variant) is kept as it was sent, in a heap block of
/// its own: reading a Uid always gives back the text the server sent.
/// Thread-safety: a value type.
class Uid {
 public:
  Uid() noexcept = default;
  Uid(std::string_view text);  // NOLINT(google-explicit-constructor): a string field
  Uid(const std::string& text) : Uid(std::string_view(text)) {}  // NOLINT: as above
  Uid(const char* text) : Uid(std::string_view(text)) {}         // NOLINT: as above
  Uid(std::nullptr_t) = delete;
  Uid(const Uid& other);
  Uid(Uid&& other) noexcept { take(other); }
  Uid& operator=(const Uid& other);
  Uid& operator=(Uid&& other) noexcept;
  ~Uid() { release(); }

  [[nodiscard]] bool empty() const noexcept { return lo_ == 0 && hi_ == 0; }  // hi_ is active
  /// The text the server sent.
  [[nodiscard]] std::string str() const;

  /// Equal when the texts are equal (a string compares as the Uid it reads as).
  friend bool operator==(const Uid& a, const Uid& b) noexcept;

 private:
  // A UUID: hi_ and lo_ are its bytes 0-7 and 8-15, big-endian; the RFC 4122 variant puts 10 in
  // the top bits of lo_. Other text: lo_ == kText and block_ (in hi_'s place) is a heap block:
  // the length as a std::uint32_t, then the characters. Empty: hi_ and lo_ 0.
  static constexpr std::uint64_t kText = 1;
  [[nodiscard]] bool is_text() const noexcept { return lo_ == kText; }
  [[nodiscard]] std::string_view text() const noexcept;
  void take(Uid& other) noexcept;  // moves other's value here; other becomes empty
  void release() noexcept;

  union {
    std::uint64_t hi_ = 0;  // the active member unless is_text()
    char* block_;           // the active member when is_text()
  };
  std::uint64_t lo_ = 0;
};

std::ostream& operator<<(std::ostream& os, const Uid& uid);

}  // namespace kinformer::client

template <>
struct std::hash<kinformer::client::Uid> {
  std::size_t operator()(const kinformer::client::Uid& u) const noexcept {
    return std::hash<std::string>{}(u.str());
  }
};
