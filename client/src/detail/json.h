#pragma once
// Private JSON helpers shared by the codecs, the watch decoder and the error mapping.

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "kinformer/client/object.h"
#include "kinformer/client/resource.h"
#include "kinformer/client/result.h"

namespace kinformer::client::detail {

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

/// The member `name` of object `v`, or nullptr when absent (or `v` is not an object).
inline const JsonValue* member(const JsonValue& v, const char* name) {
  if (!v.IsObject()) return nullptr;
  auto it = v.FindMember(name);
  return it == v.MemberEnd() ? nullptr : &it->value;
}

inline std::string_view view(const JsonValue& v) {
  return v.IsString() ? std::string_view(v.GetString(), v.GetStringLength()) : std::string_view();
}

/// The string member `name`, "" when absent or not a string.
inline std::string_view get_string(const JsonValue& v, const char* name) {
  const JsonValue* m = member(v, name);
  return m ? view(*m) : std::string_view();
}

inline std::int64_t get_int(const JsonValue& v, const char* name, std::int64_t fallback = 0) {
  const JsonValue* m = member(v, name);
  return m && m->IsInt64() ? m->GetInt64() : fallback;
}

inline bool get_bool(const JsonValue& v, const char* name, bool fallback = false) {
  const JsonValue* m = member(v, name);
  return m && m->IsBool() ? m->GetBool() : fallback;
}

inline Error decode_error(std::string message) {
  return Error::make(Errc::decode, std::move(message));
}

/// A reused parse arena (one per decoder): values smaller than it decode without allocating for
/// the DOM. Clear `pool` before each parse.
struct JsonArena {
  static constexpr std::size_t kBytes = std::size_t{64} * 1024;
  JsonArena() : pool(buffer, kBytes) {}
  char buffer[kBytes];
  rapidjson::MemoryPoolAllocator<> pool;
  rapidjson::CrtAllocator stack;
};

/// Where and why parse_insitu() failed.
struct JsonParseError {
  std::string reason;  ///< e.g. "JSON nested deeper than 100 levels"
  std::size_t offset;  ///< byte offset in the parsed text
};

/// Parses `text` (size bytes, NUL-terminated at text[size]) in place into `doc`, which then
/// refers to the text. Fails for malformed JSON, nesting deeper than kMaxJsonDepth, and anything
/// but whitespace after the value. `reader_stack` is the parser's scratch allocator (nullptr:
/// its own).
std::optional<JsonParseError> parse_insitu(rapidjson::Document& doc, char* text, std::size_t size,
                                           rapidjson::CrtAllocator* reader_stack = nullptr);

/// Decodes metadata (tolerant: unknown fields ignored; managedFields skipped). Fails only for a
/// wrong shape (metadata not an object).
Status decode_meta(const JsonValue& object, ObjectMeta& meta);
/// Label and annotation values longer than this are not pooled (InternedString::unpooled): long
/// values are unique per object (kubectl's last-applied-configuration holds the whole manifest,
/// a Secret's data included), so only short values are shared. Label values are at most 63.
inline constexpr std::size_t kMaxPooledMapValue = 64;
inline InternedString map_value(std::string_view v) {
  return v.size() > kMaxPooledMapValue ? InternedString::unpooled(v) : InternedString(v);
}

/// Decodes a {"k":"v"} map into a sorted StringMap.
void decode_string_map(const JsonValue* v, StringMap& out);

void write_string(JsonWriter& w, std::string_view s);
void write_meta(JsonWriter& w, const ObjectMeta& meta);
/// Writes "apiVersion", "kind" and "metadata" members (inside an open object).
void write_header(JsonWriter& w, const GroupVersionResource& gvr, const ObjectMeta& meta);

/// JSON-escapes `s` as a quoted string.
std::string quote(std::string_view s);

}  // namespace kinformer::client::detail
