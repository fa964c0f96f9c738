#pragma once
// Kubernetes label selectors: equality-based (`a=b`, `a==b`, `a!=b`) and set-based
// (`a in (x,y)`, `a notin (x)`, `a`, `!a`), comma-separated (all requirements must hold).

#include <string>
#include <string_view>
#include <vector>

#include "kinformer/client/object.h"

namespace kinformer::cache {

/// A parsed label selector. Value type; immutable after parse().
/// Thread-safety: const methods may be called from any thread concurrently.
class LabelSelector {
 public:
  enum class Operator { equals, not_equals, in, not_in, exists, does_not_exist };

  /// One requirement: `key op values`.
  struct Requirement {
    std::string key;
    Operator op = Operator::exists;
    std::vector<std::string> values;  ///< sorted; empty for exists / does_not_exist
  };

  /// The empty selector: matches everything.
  LabelSelector() = default;

  /// Parses `text`. Throws client::ConfigError naming the offending position and what was
  /// expected (selectors are configuration). An empty or blank string matches everything.
  static LabelSelector parse(std::string_view text);

  /// True when every requirement holds for `labels`.
  [[nodiscard]] bool matches(const client::StringMap& labels) const;
  [[nodiscard]] bool empty() const noexcept { return requirements_.empty(); }
  [[nodiscard]] const std::vector<Requirement>& requirements() const noexcept {
    return requirements_;
  }
  /// Canonical text (requirements sorted by key), suitable as part of a cache key.
  [[nodiscard]] std::string to_string() const;

 private:
  std::vector<Requirement> requirements_;
};

}  // namespace kinformer::cache
