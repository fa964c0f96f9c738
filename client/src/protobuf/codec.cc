// ProtobufCodec for the typed models, and the response bodies around them (object, list,
// Status). The envelope: k8s.io/apimachinery pkg/runtime/serializer/protobuf/protobuf.go
// (the 4-byte prefix "k8s\0", then a runtime.Unknown whose raw is the object).
#include "kinformer/client/protobuf.h"

#include "kinformer/client/api_error.h"
#include "protobuf/decoders.h"

namespace kinformer::client {
namespace {

using detail::FieldPath;
using detail::pb::Decoder;
using detail::pb::Message;

template <typename T>
class TypedProtobufCodec final : public ProtobufCodec {
 public:
  using DecodeFn = void (*)(Message&, T&);
  TypedProtobufCodec(GroupVersionResource gvr, DecodeFn decode)
      : gvr_(std::move(gvr)), decode_(decode) {}

  const GroupVersionResource& gvr() const override { return gvr_; }

  Result<std::shared_ptr<Object>> decode(std::string_view message) const override {
    auto object = std::make_shared<T>();
    Decoder d(gvr_.kind, object.get());
    const FieldPath root;
    // metadata (field 1) first, so that errors in the rest name the object; Go writes it first
    // anyway, so the first pass usually stops reading after one field's worth of skipping.
    {
      Message m(d, message, root);
      while (m.next()) {
        if (m.tag() == 1) {
          detail::pb::nested(m, "metadata", [&](Message& md) {
            detail::pb::decode_object_meta(md, object->metadata);
          });
        } else {
          m.skip();
        }
      }
    }
    if (!d.failed()) {
      Message m(d, message, root);
      decode_(m, *object);
    }
    if (auto s = std::move(d).status(); !s) return std::move(s).error();
    return std::shared_ptr<Object>(std::move(object));
  }

 private:
  GroupVersionResource gvr_;
  DecodeFn decode_;
};

template <typename T>
ProtobufCodecPtr make_codec(void (*decode)(Message&, T&)) {
  return std::make_shared<const TypedProtobufCodec<T>>(ResourceTraits<T>::type().gvr, decode);
}

}  // namespace

ProtobufCodecPtr protobuf_codec(const ResourceType& type) {
  struct Entry {
    const Codec* json;
    ProtobufCodecPtr protobuf;
  };
  static const Entry entries[] = {
      {ResourceTraits<Pod>::type().codec.get(), make_codec<Pod>(detail::pb::decode_pod)},
      {ResourceTraits<Secret>::type().codec.get(), make_codec<Secret>(detail::pb::decode_secret)},
      {ResourceTraits<Endpoints>::type().codec.get(),
       make_codec<Endpoints>(detail::pb::decode_endpoints)},
      {ResourceTraits<EndpointSlice>::type().codec.get(),
       make_codec<EndpointSlice>(detail::pb::decode_endpoint_slice)},
  };
  for (const auto& e : entries) {
    if (e.json == type.codec.get()) return e.protobuf;
  }
  return nullptr;
}

Result<ObjectPtr> decode_protobuf_object(const ProtobufCodec& codec, std::string_view body) {
  const std::string what = codec.gvr().to_string() + " response";
  auto env = detail::pb::parse_envelope(body, what);
  if (!env) return std::move(env).error();
  if (auto s = detail::pb::expect_kind(env.value(), codec.gvr().kind, what); !s) {
    return std::move(s).error();
  }
  auto object = codec.decode(env->raw);
  if (!object) return std::move(object).error();
  return ObjectPtr(std::move(object).value());
}

// <Kind>List {metadata = 1 ListMeta, items = 2 repeated <Kind>} (k8s.io/api generated.proto;
// protobuf/collections.go streams lists with exactly these two tags).
Result<ObjectList> decode_protobuf_list(const ProtobufCodec& codec, std::string_view body) {
  const std::string resource = codec.gvr().to_string();
  const std::string what = resource + " list response";
  auto env = detail::pb::parse_envelope(body, what);
  if (!env) return std::move(env).error();
  if (auto s = detail::pb::expect_kind(env.value(), codec.gvr().kind + "List", what); !s) {
    return std::move(s).error();
  }
  ObjectList out;
  const std::string list_kind = codec.gvr().kind + "List";
  Decoder d(list_kind, nullptr);
  const FieldPath root;
  Message m(d, env->raw, root);
  while (m.next()) {
    switch (m.tag()) {
      case 1:
        detail::pb::nested(m, "metadata", [&](Message& md) {
          detail::pb::decode_list_meta(md, out.resource_version, out.continue_token);
        });
        break;
      case 2: {
        std::string_view item;
        if (!m.message("items", item)) break;
        auto object = codec.decode(item);
        if (!object) {
          Error e = std::move(object).error();
          e.message =
              resource + " list item " + std::to_string(out.items.size()) + ": " + e.message;
          return e;
        }
        out.items.push_back(std::move(object).value());
        break;
      }
      default:
        m.skip();
    }
  }
  if (auto s = std::move(d).status(); !s) {
    Error e = std::move(s).error();
    e.message = what + ": " + e.message;
    return e;
  }
  return out;
}

Error error_from_protobuf_response(int http_status, std::string_view body,
                                   std::string_view retry_after_header) {
  if (!body.starts_with(kProtobufMagic)) {
    return error_from_response(http_status, body, retry_after_header);
  }
  Error e;
  auto env = detail::pb::parse_envelope(body, "error response");
  bool parsed = false;
  if (env && env->kind == "Status") {
    parsed = decode_protobuf_status(env->raw, e).ok();
  }
  if (!parsed) {
    // Protobuf that is not a Status may be an API object (e.g. a Secret): only its size is kept.
    e = Error{};
    e.message = "HTTP " + std::to_string(http_status) +
                " with a protobuf body that is not a Status (" + std::to_string(body.size()) +
                " bytes)";
    if (http_status == 429) e.reason = "TooManyRequests";
  }
  e.code = Errc::api;
  e.http_status = http_status;
  // The header wins over the Status detail, as for JSON: let error_from_response parse it.
  Error header = error_from_response(http_status, {}, retry_after_header);
  if (header.retry_after) e.retry_after = header.retry_after;
  if (e.message.empty()) e.message = "HTTP " + std::to_string(http_status);
  return e;
}

}  // namespace kinformer::client
