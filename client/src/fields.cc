#include "detail/fields.h"

namespace kinformer::client::detail {
namespace {

const char* type_name(const JsonValue& v) {
  switch (v.GetType()) {
    case rapidjson::kNullType:
      return "null";
    case rapidjson::kFalseType:
    case rapidjson::kTrueType:
      return "a boolean";
    case rapidjson::kObjectType:
      return "an object";
    case rapidjson::kArrayType:
      return "an array";
    case rapidjson::kStringType:
      return "a string";
    case rapidjson::kNumberType:
      return v.IsInt64() || v.IsUint64() ? "an integer" : "a number";
  }
  return "a value";
}

}  // namespace

std::string FieldPath::to_string() const {
  if (!parent) return name ? std::string(name) : std::string();
  std::string s = parent->to_string();
  if (name) {
    if (!s.empty()) s += '.';
    s += name;
  } else {
    s += '[' + std::to_string(index) + ']';
  }
  return s;
}

void FieldReader::fail(const FieldPath& at, const char* name, const char* expected,
                       const JsonValue& got) {
  if (error_) return;
  std::string field = at.to_string();
  if (name) {
    if (!field.empty()) field += '.';
    field += name;
  }
  std::string message(kind_);
  message += ' ';
  message += object_.key();
  message += ": ";
  message += field.empty() ? std::string("object") : field;
  message += ": expected ";
  message += expected;
  message += ", got ";
  message += type_name(got);  // the type, never the value (it may be secret)
  error_ = decode_error(std::move(message));
}

void FieldReader::string(const JsonValue& v, const FieldPath& at, const char* name,
                         std::string& out) {
  const JsonValue* m = find(v, name);
  if (!m) return;
  if (!m->IsString()) return fail(at, name, "a string", *m);
  out.assign(m->GetString(), m->GetStringLength());
}

template <typename T>
void FieldReader::string_as(const JsonValue& v, const FieldPath& at, const char* name, T& out) {
  const JsonValue* m = find(v, name);
  if (!m) return;
  if (!m->IsString()) return fail(at, name, "a string", *m);
  out = T(std::string_view(m->GetString(), m->GetStringLength()));
}

void FieldReader::string(const JsonValue& v, const FieldPath& at, const char* name,
                         InternedString& out) {
  string_as(v, at, name, out);
}

void FieldReader::string(const JsonValue& v, const FieldPath& at, const char* name, Uid& out) {
  string_as(v, at, name, out);
}

void FieldReader::boolean(const JsonValue& v, const FieldPath& at, const char* name, bool& out) {
  const JsonValue* m = find(v, name);
  if (!m) return;
  if (!m->IsBool()) return fail(at, name, "a boolean", *m);
  out = m->GetBool();
}

void FieldReader::int32(const JsonValue& v, const FieldPath& at, const char* name,
                        std::int32_t& out) {
  const JsonValue* m = find(v, name);
  if (!m) return;
  if (!m->IsInt()) return fail(at, name, "a 32-bit integer", *m);
  out = m->GetInt();
}

const JsonValue* FieldReader::object(const JsonValue& v, const FieldPath& at, const char* name) {
  const JsonValue* m = find(v, name);
  if (!m) return nullptr;
  if (!m->IsObject()) {
    fail(at, name, "an object", *m);
    return nullptr;
  }
  return m;
}

const JsonValue* FieldReader::array(const JsonValue& v, const FieldPath& at, const char* name) {
  const JsonValue* m = find(v, name);
  if (!m) return nullptr;
  if (!m->IsArray()) {
    fail(at, name, "an array", *m);
    return nullptr;
  }
  return m;
}

bool FieldReader::expect_object(const JsonValue& v, const FieldPath& at) {
  if (v.IsObject()) return true;
  fail(at, nullptr, "an object", v);
  return false;
}

bool FieldReader::expect_string(const JsonValue& v, const FieldPath& at) {
  if (v.IsString()) return true;
  fail(at, nullptr, "a string", v);
  return false;
}

Status FieldReader::status() && {
  if (error_) return std::move(*error_);
  return Ok{};
}

}  // namespace kinformer::client::detail
