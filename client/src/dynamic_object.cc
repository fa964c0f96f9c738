#include "kinformer/client/dynamic_object.h"

#include "detail/json.h"

namespace kinformer::client {
namespace {

// Writes `v`, which sits at nesting level `depth` (1 = outermost); false beyond kMaxJsonDepth.
// Value::Accept() recurses without limit, and a value built by hand never met the parser's.
bool write_bounded(detail::JsonWriter& w, const JsonValue& v, int depth) {
  if (!v.IsObject() && !v.IsArray()) {
    v.Accept(w);
    return true;
  }
  if (depth > kMaxJsonDepth) return false;
  if (v.IsArray()) {
    w.StartArray();
    for (const auto& e : v.GetArray()) {
      if (!write_bounded(w, e, depth + 1)) return false;
    }
    w.EndArray();
    return true;
  }
  w.StartObject();
  for (auto m = v.MemberBegin(); m != v.MemberEnd(); ++m) {
    w.String(m->name.GetString(), m->name.GetStringLength());
    if (!write_bounded(w, m->value, depth + 1)) return false;
  }
  w.EndObject();
  return true;
}

class DynamicCodec final : public Codec {
 public:
  Result<std::shared_ptr<Object>> decode(const JsonValue& value) const override {
    if (!value.IsObject()) return detail::decode_error("object is not a JSON object");
    auto object = std::make_shared<DynamicObject>();
    if (auto s = detail::decode_meta(value, object->metadata); !s) return std::move(s).error();
    rapidjson::StringBuffer buf;
    detail::JsonWriter w(buf);
    auto too_deep = [] {
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
          if (!write_bounded(w, m->value, 3)) return too_deep();
        }
        w.EndObject();
      } else if (!write_bounded(w, it->value, 2)) {
        return too_deep();
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
