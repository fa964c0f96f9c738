#include "detail/json.h"

#include <rapidjson/error/en.h>
#include <rapidjson/reader.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace kinformer::client::detail {

// json_fwd.h declares JsonValue without RapidJSON; it must be RapidJSON's own default value type.
static_assert(std::is_same_v<JsonValue, rapidjson::Value>,
              "json_fwd.h does not match rapidjson::Value");

namespace {

// Forwards the parser's events to the document, refusing to open a level beyond kMaxJsonDepth
// (RapidJSON's recursive descent has no limit of its own).
class DepthLimited {
 public:
  explicit DepthLimited(rapidjson::Document& doc) : doc_(doc) {}
  bool too_deep() const { return too_deep_; }

  bool Null() { return doc_.Null(); }
  bool Bool(bool b) { return doc_.Bool(b); }
  bool Int(int i) { return doc_.Int(i); }
  bool Uint(unsigned u) { return doc_.Uint(u); }
  bool Int64(std::int64_t i) { return doc_.Int64(i); }
  bool Uint64(std::uint64_t u) { return doc_.Uint64(u); }
  bool Double(double d) { return doc_.Double(d); }
  bool RawNumber(const char* s, rapidjson::SizeType n, bool copy) {
    return doc_.RawNumber(s, n, copy);
  }
  bool String(const char* s, rapidjson::SizeType n, bool copy) { return doc_.String(s, n, copy); }
  bool Key(const char* s, rapidjson::SizeType n, bool copy) { return doc_.Key(s, n, copy); }
  bool StartObject() { return enter() && doc_.StartObject(); }
  bool EndObject(rapidjson::SizeType n) {
    --depth_;
    return doc_.EndObject(n);
  }
  bool StartArray() { return enter() && doc_.StartArray(); }
  bool EndArray(rapidjson::SizeType n) {
    --depth_;
    return doc_.EndArray(n);
  }

 private:
  bool enter() {
    too_deep_ = ++depth_ > kMaxJsonDepth;
    return !too_deep_;
  }
  rapidjson::Document& doc_;
  int depth_ = 0;
  bool too_deep_ = false;
};

}  // namespace

std::optional<JsonParseError> parse_insitu(rapidjson::Document& doc, char* text, std::size_t size,
                                           rapidjson::CrtAllocator* reader_stack) {
  constexpr unsigned kFlags = rapidjson::kParseInsituFlag | rapidjson::kParseStopWhenDoneFlag;
  rapidjson::InsituStringStream in(text);
  rapidjson::Reader reader(reader_stack);
  DepthLimited handler(doc);
  rapidjson::ParseResult ok;
  auto parse = [&](rapidjson::Document&) {
    ok = reader.Parse<kFlags>(in, handler);
    return !ok.IsError();
  };
  doc.Populate(parse);
  if (handler.too_deep()) {
    return JsonParseError{"JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels",
                          reader.GetErrorOffset()};
  }
  if (ok.IsError()) return JsonParseError{rapidjson::GetParseError_En(ok.Code()), ok.Offset()};
  // kParseStopWhenDoneFlag ends at the value; the rest (up to an embedded NUL, which ends the
  // in-situ stream too) must be whitespace.
  std::size_t end = in.Tell();
  while (end < size &&
         (text[end] == ' ' || text[end] == '\t' || text[end] == '\r' || text[end] == '\n')) {
    ++end;
  }
  if (end < size) return JsonParseError{"unexpected bytes after the JSON value", end};
  return std::nullopt;
}

void decode_string_map(const JsonValue* v, StringMap& out) {
  out.clear();
  if (!v || !v->IsObject()) return;
  out.reserve(v->MemberCount());
  for (auto it = v->MemberBegin(); it != v->MemberEnd(); ++it) {
    if (!it->value.IsString()) continue;
    out.emplace_back(view(it->name), map_value(view(it->value)));
  }
  std::sort(out.begin(), out.end());
}

Status decode_meta(const JsonValue& object, ObjectMeta& meta) {
  const JsonValue* m = member(object, "metadata");
  if (!m || m->IsNull()) return Ok{};
  if (!m->IsObject()) return decode_error("metadata is not an object");
  const JsonValue& md = *m;
  meta.name = get_string(md, "name");
  meta.namespace_ = get_string(md, "namespace");
  meta.uid = get_string(md, "uid");
  meta.resource_version = get_string(md, "resourceVersion");
  meta.generate_name = get_string(md, "generateName");
  meta.generation = get_int(md, "generation");
  decode_string_map(member(md, "labels"), meta.labels);
  decode_string_map(member(md, "annotations"), meta.annotations);
  meta.owner_references.clear();
  if (const JsonValue* refs = member(md, "ownerReferences"); refs && refs->IsArray()) {
    for (const auto& r : refs->GetArray()) {
      OwnerReference ref;
      ref.api_version = get_string(r, "apiVersion");
      ref.kind = get_string(r, "kind");
      ref.name = get_string(r, "name");
      ref.uid = get_string(r, "uid");
      ref.controller = get_bool(r, "controller");
      ref.block_owner_deletion = get_bool(r, "blockOwnerDeletion");
      meta.owner_references.push_back(std::move(ref));
    }
  }
  meta.finalizers.clear();
  if (const JsonValue* f = member(md, "finalizers"); f && f->IsArray()) {
    for (const auto& s : f->GetArray()) {
      if (s.IsString()) meta.finalizers.emplace_back(view(s));
    }
  }
  // A time that is not RFC 3339 fails the object, as it does in Go (metav1.Time); "" and null
  // read as unset.
  auto time = [&](const char* name, std::optional<Timestamp>& out) -> Status {
    out.reset();
    const JsonValue* t = member(md, name);
    if (!t || !t->IsString() || t->GetStringLength() == 0) return Ok{};
    out = Timestamp::parse(view(*t));
    if (!out) {
      return decode_error(make_key(meta.namespace_, meta.name) + ": metadata." + name +
                          ": not an RFC 3339 time in the years 0-9999");
    }
    return Ok{};
  };
  std::optional<Timestamp> created;
  if (auto st = time("creationTimestamp", created); !st) return st;
  meta.creation_timestamp = created.value_or(Timestamp{});
  return time("deletionTimestamp", meta.deletion_timestamp);
}

void write_string(JsonWriter& w, std::string_view s) {
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
}

namespace {
void write_map(JsonWriter& w, const char* key, const StringMap& map) {
  if (map.empty()) return;
  w.Key(key);
  w.StartObject();
  for (const auto& [k, v] : map) {
    write_string(w, k);
    write_string(w, v);
  }
  w.EndObject();
}
void write_opt(JsonWriter& w, const char* key, std::string_view value) {
  if (value.empty()) return;
  w.Key(key);
  write_string(w, value);
}
}  // namespace

void write_meta(JsonWriter& w, const ObjectMeta& meta) {
  w.StartObject();
  write_opt(w, "name", meta.name);
  write_opt(w, "namespace", meta.namespace_);
  write_opt(w, "generateName", meta.generate_name);
  write_opt(w, "uid", meta.uid.str());
  write_opt(w, "resourceVersion", meta.resource_version);
  if (meta.generation != 0) {
    w.Key("generation");
    w.Int64(meta.generation);
  }
  write_opt(w, "creationTimestamp", meta.creation_timestamp.to_string());
  if (meta.deletion_timestamp) {
    w.Key("deletionTimestamp");
    write_string(w, meta.deletion_timestamp->to_string());
  }
  write_map(w, "labels", meta.labels);
  write_map(w, "annotations", meta.annotations);
  if (!meta.owner_references.empty()) {
    w.Key("ownerReferences");
    w.StartArray();
    for (const auto& r : meta.owner_references) {
      w.StartObject();
      write_opt(w, "apiVersion", r.api_version);
      write_opt(w, "kind", r.kind);
      write_opt(w, "name", r.name);
      write_opt(w, "uid", r.uid.str());
      if (r.controller) {
        w.Key("controller");
        w.Bool(true);
      }
      if (r.block_owner_deletion) {
        w.Key("blockOwnerDeletion");
        w.Bool(true);
      }
      w.EndObject();
    }
    w.EndArray();
  }
  if (!meta.finalizers.empty()) {
    w.Key("finalizers");
    w.StartArray();
    for (const auto& f : meta.finalizers) write_string(w, f);
    w.EndArray();
  }
  w.EndObject();
}

void write_header(JsonWriter& w, const GroupVersionResource& gvr, const ObjectMeta& meta) {
  w.Key("apiVersion");
  write_string(w, gvr.api_version());
  w.Key("kind");
  write_string(w, gvr.kind);
  w.Key("metadata");
  write_meta(w, meta);
}

std::string quote(std::string_view s) {
  rapidjson::StringBuffer buf;
  JsonWriter w(buf);
  write_string(w, s);
  return std::string(buf.GetString(), buf.GetSize());
}

}  // namespace kinformer::client::detail
