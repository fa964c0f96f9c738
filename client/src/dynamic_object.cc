#include "kinformer/client/dynamic_object.h"

#include <cmath>

#include "detail/json.h"

namespace kinformer::client {
namespace {

enum class WriteError { none, too_deep, not_finite };

// Writes `v`, which sits at nesting level `depth` (1 = outermost); too_deep beyond kMaxJsonDepth.
// Value::Accept() recurses without limit, and a value built by hand never met the parser's.
// RapidJSON parses a number beyond the double range (1e309) as infinity, which JSON cannot
// carry: the writer would emit nothing and the stored JSON would be invalid.
WriteError write_bounded(detail::JsonWriter& w, const JsonValue& v, int depth) {
  if (!v.IsObject() && !v.IsArray()) {
    if (v.IsDouble() && !std::isfinite(v.GetDouble())) return WriteError::not_finite;
    v.Accept(w);
    return WriteError::none;
  }
  if (depth > kMaxJsonDepth) return WriteError::too_deep;
  if (v.IsArray()) {
    w.StartArray();
    for (const auto& e : v.GetArray()) {
      if (auto r = write_bounded(w, e, depth + 1); r != WriteError::none) return r;
    }
    w.EndArray();
    return WriteError::none;
  }
  w.StartObject();
  for (auto m = v.MemberBegin(); m != v.MemberEnd(); ++m) {
    w.String(m->name.GetString(), m->name.GetStringLength());
    if (auto r = write_bounded(w, m->value, depth + 1); r != WriteError::none) return r;
  }
  w.EndObject();
  return WriteError::none;
}

class DynamicCodec final : public Codec {
 public:
  Result<std::shared_ptr<Object>> decode(const JsonValue& value) const override {
    if (!value.IsObject()) return detail::decode_error("object is not a JSON object");
    auto object = std::make_shared<DynamicObject>();
    if (auto s = detail::decode_meta(value, object->metadata); !s) return std::move(s).error();
    rapidjson::StringBuffer buf;
    detail::JsonWriter w(buf);
    auto failed = [](WriteError e) {
      if (e == WriteError::not_finite) {
        return detail::decode_error("object has a number outside the range of a double");
      }
      return detail::decode_error("object is nested deeper than " + std::to_string(kMaxJsonDepth) +
                                  " levels");
    };
    w.StartObject();
    for (auto it = value.MemberBegin(); it != value.MemberEnd(); ++it) {
      w.String(it->name.GetString(), it->name.GetStringLength());
      if (detail::view(it->name) == "metadata" && it->value.IsObject()) {
        w.StartObject();
        for (auto m = it->value.MemberBegin(); m != it->value.MemberEnd(); ++m) {
          if (detail::view(m->name) == "managedFields") continue;
          w.String(m->name.GetString(), m->name.GetStringLength());
          if (auto e = write_bounded(w, m->value, 3); e != WriteError::none) return failed(e);
        }
        w.EndObject();
      } else if (auto e = write_bounded(w, it->value, 2); e != WriteError::none) {
        return failed(e);
      }
    }
    w.EndObject();
    object->json.assign(buf.GetString(), buf.GetSize());
    return std::shared_ptr<Object>(std::move(object));
  }

  std::string encode(const Object& object) const override {
    if (const auto* d = dynamic_cast<const DynamicObject*>(&object)) return d->json;
    rapidjson::StringBuffer buf;
    detail::JsonWriter w(buf);
    w.StartObject();
    w.Key("metadata");
    detail::write_meta(w, object.metadata);
    w.EndObject();
    return std::string(buf.GetString(), buf.GetSize());
  }
};

}  // namespace

std::shared_ptr<const Codec> dynamic_codec() {
  static const auto codec = std::make_shared<const DynamicCodec>();
  return codec;
}

ResourceType dynamic_resource(GroupVersionResource gvr) {
  return {std::move(gvr), dynamic_codec()};
}

}  // namespace kinformer::client
