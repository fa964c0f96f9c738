#pragma once
// InternedString: an immutable string shared by every object that holds the same text.
//
// Cached objects repeat the same short strings many times over: label and annotation keys and
// values, namespaces, node names, images, owner kinds, port names, conditions. A std::string per
// field costs 32 bytes plus, past 15 characters, a heap block of its own in every object. An
// InternedString is one pointer to a process-wide entry, counted, freed when its last holder goes.
// Fields that are unique per object (names, UIDs, resource versions, IPs) stay std::string:
// interning them would only add the pool's overhead.

#include <atomic>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <string_view>

namespace kinformer::client {

/// An immutable string interned in a process-wide pool: equal texts share one entry, so a copy
/// is a pointer and a reference count, and equality is a pointer comparison. The empty string
/// holds no entry. Reads like a `const std::string&` (it converts to one, and to
/// `std::string_view`), so code that reads model fields as strings keeps working.
/// Thread-safety: as a `const std::string`: any number of threads may read and copy one value;
/// the pool is safe for concurrent use from any thread.
class InternedString {
 public:
  InternedString() noexcept = default;
  InternedString(std::string_view text);  // NOLINT(google-explicit-constructor): a string field
  InternedString(const std::string& text) : InternedString(std::string_view(text)) {}  // NOLINT
  InternedString(const char* text) : InternedString(std::string_view(text)) {}         // NOLINT
  InternedString(std::nullptr_t) = delete;

  /// A value with the same interface that is not pooled: its own entry, never found by a lookup.
  /// For long texts that are unique per object (a last-applied-configuration annotation, which
  /// for a Secret holds its data), where sharing saves nothing and the pool must not hold them.
  static InternedString unpooled(std::string_view text);
  InternedString(const InternedString& other) noexcept;
  InternedString(InternedString&& other) noexcept : entry_(other.entry_) { other.entry_ = nullptr; }
  InternedString& operator=(const InternedString& other) noexcept;
  InternedString& operator=(InternedString&& other) noexcept;
  ~InternedString() { release(); }

  [[nodiscard]] const std::string& str() const noexcept;
  operator const std::string&() const noexcept { return str(); }  // NOLINT: reads as a string
  operator std::string_view() const noexcept { return str(); }    // NOLINT: reads as a string
  [[nodiscard]] std::string_view view() const noexcept { return str(); }
  [[nodiscard]] const char* c_str() const noexcept { return str().c_str(); }
  [[nodiscard]] const char* data() const noexcept { return str().data(); }
  [[nodiscard]] std::size_t size() const noexcept { return str().size(); }
  [[nodiscard]] std::size_t length() const noexcept { return str().size(); }
  [[nodiscard]] bool empty() const noexcept { return entry_ == nullptr; }
  [[nodiscard]] auto begin() const noexcept { return str().begin(); }
  [[nodiscard]] auto end() const noexcept { return str().end(); }
  [[nodiscard]] bool starts_with(std::string_view prefix) const noexcept {
    return view().starts_with(prefix);
  }
  [[nodiscard]] bool ends_with(std::string_view suffix) const noexcept {
    return view().ends_with(suffix);
  }

  /// Equal pooled texts share one entry (the same pointer); an unpooled one compares its text.
  friend bool operator==(const InternedString& a, const InternedString& b) noexcept {
    return a.entry_ == b.entry_ || a.view() == b.view();
  }
  friend bool operator==(const InternedString& a, std::string_view b) noexcept {
    return a.view() == b;
  }
  friend bool operator==(const InternedString& a, const std::string& b) noexcept {
    return a.view() == b;
  }
  friend bool operator==(const InternedString& a, const char* b) noexcept { return a.view() == b; }
  friend std::strong_ordering operator<=>(const InternedString& a,
                                          const InternedString& b) noexcept {
    return a.view() <=> b.view();
  }
  friend std::strong_ordering operator<=>(const InternedString& a, std::string_view b) noexcept {
    return a.view() <=> b;
  }
  friend std::strong_ordering operator<=>(const InternedString& a, const std::string& b) noexcept {
    return a.view() <=> std::string_view(b);
  }
  friend std::strong_ordering operator<=>(const InternedString& a, const char* b) noexcept {
    return a.view() <=> std::string_view(b);
  }

  /// Distinct texts in the pool right now (for tests and diagnostics).
  static std::size_t pool_size() noexcept;

  struct Entry;  // the pooled text and its count (defined in interned_string.cc)

 private:
  void release() noexcept;
  Entry* entry_ = nullptr;
};

std::ostream& operator<<(std::ostream& os, const InternedString& s);

}  // namespace kinformer::client

template <>
struct std::hash<kinformer::client::InternedString> {
  std::size_t operator()(const kinformer::client::InternedString& s) const noexcept {
    return std::hash<std::string_view>{}(s.view());
  }
};
