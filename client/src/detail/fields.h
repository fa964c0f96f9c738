#pragma once
// Private: strict field reading for typed models. Absent or null fields read as defaults; a field
// of the wrong JSON type is an Errc::decode error that names the field
// ("spec.containers[1].image").

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "detail/json.h"

namespace kinformer::client::detail {

/// Where a value sits inside the object being decoded: a chain of stack frames, turned into text
/// ("spec.containers[1].ports[0]") only when an error is reported. The root is default-constructed.
struct FieldPath {
  const FieldPath* parent = nullptr;
  const char* name = nullptr;  ///< member name; nullptr for an array element
  std::size_t index = 0;

  [[nodiscard]] FieldPath child(const char* member_name) const { return {this, member_name, 0}; }
  [[nodiscard]] FieldPath element(std::size_t i) const { return {this, nullptr, i}; }
  [[nodiscard]] std::string to_string() const;
};

/// Reads the fields of one object, recording the first wrong-shaped field. Decoders read
/// everything and check error() once, so the success path carries no per-field Status.
/// Not thread-safe; one reader per decode call, on the stack.
class FieldReader {
 public:
  /// `kind` and `object` (whose metadata is already decoded) prefix error messages:
  /// "Pod ns/name: spec.hostNetwork: expected a boolean, got a string".
  FieldReader(std::string_view kind, const Object& object) : kind_(kind), object_(object) {}

  /// String member `name` of `v` (at `at`) into `out`; absent/null leaves `out` unchanged.
  void string(const JsonValue& v, const FieldPath& at, const char* name, std::string& out);
  void string(const JsonValue& v, const FieldPath& at, const char* name, InternedString& out);
  void string(const JsonValue& v, const FieldPath& at, const char* name, Uid& out);
  /// Boolean member; absent/null leaves `out` unchanged.
  void boolean(const JsonValue& v, const FieldPath& at, const char* name, bool& out);
  /// 32-bit integer member; absent/null leaves `out` unchanged.
  void int32(const JsonValue& v, const FieldPath& at, const char* name, std::int32_t& out);
  /// Object member, or nullptr when absent/null (or wrong, which is recorded).
  const JsonValue* object(const JsonValue& v, const FieldPath& at, const char* name);
  /// Array member, or nullptr when absent/null (or wrong, which is recorded).
  const JsonValue* array(const JsonValue& v, const FieldPath& at, const char* name);
  /// Checks that an array element is an object (records an error otherwise).
  bool expect_object(const JsonValue& v, const FieldPath& at);
  /// Checks that an array element is a string (records an error otherwise).
  bool expect_string(const JsonValue& v, const FieldPath& at);

  [[nodiscard]] bool failed() const noexcept { return error_.has_value(); }
  /// Ok, or the first recorded error (Errc::decode).
  [[nodiscard]] Status status() &&;

 private:
  template <typename T>
  void string_as(const JsonValue& v, const FieldPath& at, const char* name, T& out);
  // Returns the member, or nullptr when absent or null.
  static const JsonValue* find(const JsonValue& v, const char* name) {
    const JsonValue* m = member(v, name);
    return m && !m->IsNull() ? m : nullptr;
  }
  void fail(const FieldPath& at, const char* name, const char* expected, const JsonValue& got);

  std::string_view kind_;
  const Object& object_;
  std::optional<Error> error_;
};

}  // namespace kinformer::client::detail
