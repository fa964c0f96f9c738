#pragma once
// Private: a Codec for a typed model given its decode/encode functions.

#include <memory>

#include "detail/json.h"

namespace kinformer::client::detail {

template <typename T>
class TypedCodec final : public Codec {
 public:
  using DecodeFn = Status (*)(const JsonValue&, T&);
  using EncodeFn = void (*)(JsonWriter&, const T&);
  TypedCodec(GroupVersionResource gvr, DecodeFn d, EncodeFn e)
      : gvr_(std::move(gvr)), decode_(d), encode_(e) {}

  Result<std::shared_ptr<Object>> decode(const JsonValue& value) const override {
    if (!value.IsObject()) return decode_error(gvr_.kind + ": not a JSON object");
    auto object = std::make_shared<T>();
    if (auto s = decode_meta(value, object->metadata); !s) return std::move(s).error();
    if (auto s = decode_(value, *object); !s) return std::move(s).error();
    return std::shared_ptr<Object>(std::move(object));
  }

  std::string encode(const Object& object) const override {
    rapidjson::StringBuffer buf;
    JsonWriter w(buf);
    w.StartObject();
    write_header(w, gvr_, object.metadata);
    if (const auto* typed = dynamic_cast<const T*>(&object)) encode_(w, *typed);
    w.EndObject();
    return std::string(buf.GetString(), buf.GetSize());
  }

 private:
  GroupVersionResource gvr_;
  DecodeFn decode_;
  EncodeFn encode_;
};

template <typename T>
ResourceType make_type(GroupVersionResource gvr, typename TypedCodec<T>::DecodeFn d,
                       typename TypedCodec<T>::EncodeFn e) {
  auto codec = std::make_shared<const TypedCodec<T>>(gvr, d, e);
  return ResourceType{std::move(gvr), std::move(codec)};
}

/// Calls f(element) for each element of array member `name` (ignored when absent / not an array).
template <typename F>
void for_each(const JsonValue& v, const char* name, F&& f) {
  const JsonValue* a = member(v, name);
  if (!a || !a->IsArray()) return;
  for (const auto& e : a->GetArray()) f(e);
}

inline void key_string(JsonWriter& w, const char* key, std::string_view value) {
  if (value.empty()) return;
  w.Key(key);
  write_string(w, value);
}

}  // namespace kinformer::client::detail
