#pragma once
// Timestamp: a metav1.Time as the API server sends it, in 8 bytes instead of an RFC 3339 string.

#include <chrono>
#include <compare>
#include <cstdint>
#include <iosfwd>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

namespace kinformer::client {

/// A point in time at whole seconds, UTC: what metav1.Time carries (its JSON form is RFC 3339 at
/// second precision, "2024-05-01T10:00:00Z"; its protobuf form drops nanoseconds too). A
/// default-constructed Timestamp is unset (Go's zero time, JSON null, an empty protobuf Time).
/// Years 0-9999 only, as RFC 3339 allows. Thread-safety: a value type.
class Timestamp {
 public:
  /// The earliest and latest times RFC 3339 can write: 0000-01-01T00:00:00Z and
  /// 9999-12-31T23:59:59Z, in seconds since the Unix epoch.
  static constexpr std::int64_t kMinSeconds = -62167219200;
  static constexpr std::int64_t kMaxSeconds = 253402300799;

  constexpr Timestamp() noexcept = default;
  /// nullopt outside [kMinSeconds, kMaxSeconds].
  static std::optional<Timestamp> from_unix_seconds(std::int64_t seconds) noexcept;
  /// Reads RFC 3339 ("2024-05-01T10:00:00Z", a fraction and a "+02:00" offset too; a fraction
  /// is dropped, an offset converted to UTC). nullopt when `text` is not such a time or its year
  /// in UTC is outside 0-9999. "" is not a time either: the caller decides what absent means.
  static std::optional<Timestamp> parse(std::string_view text) noexcept;

  [[nodiscard]] constexpr bool empty() const noexcept { return seconds_ == kUnset; }
  /// Seconds since the Unix epoch; only when !empty().
  [[nodiscard]] constexpr std::int64_t unix_seconds() const noexcept { return seconds_; }
  /// As a std::chrono time; only when !empty().
  [[nodiscard]] std::chrono::sys_seconds time_point() const noexcept {
    return std::chrono::sys_seconds(std::chrono::seconds(seconds_));
  }
  /// RFC 3339 in UTC, "2024-05-01T10:00:00Z"; "" when empty().
  [[nodiscard]] std::string to_string() const;

  friend constexpr bool operator==(Timestamp a, Timestamp b) noexcept = default;
  friend constexpr auto operator<=>(Timestamp a, Timestamp b) noexcept = default;

 private:
  static constexpr std::int64_t kUnset = std::numeric_limits<std::int64_t>::min();
  explicit constexpr Timestamp(std::int64_t seconds) noexcept : seconds_(seconds) {}
  std::int64_t seconds_ = kUnset;
};

/// Writes to_string() ("" when unset).
std::ostream& operator<<(std::ostream& os, Timestamp t);

}  // namespace kinformer::client
