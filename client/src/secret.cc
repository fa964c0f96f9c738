#include "kinformer/client/secret.h"

#include <algorithm>

#include "detail/base64.h"
#include "detail/typed_codec.h"

namespace kinformer::client {
namespace {

Status decode(const JsonValue& v, Secret& s) {
  s.type = detail::get_string(v, "type");
  if (const JsonValue* data = detail::member(v, "data"); data && data->IsObject()) {
    s.data.reserve(data->MemberCount());
    for (auto it = data->MemberBegin(); it != data->MemberEnd(); ++it) {
      auto bytes = detail::base64_decode(detail::view(it->value));
      if (!bytes) {
        // Name the key, never the value.
        return detail::decode_error("Secret " + s.key() + ": data." + std::string(detail::view(it->name)) +
                                    " is not valid base64");
      }
      s.data.emplace_back(std::string(detail::view(it->name)), std::move(*bytes));
    }
    std::sort(s.data.begin(), s.data.end());
  }
  return Ok{};
}

std::string encode_base64(std::string_view in) {
  static const char* t = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  unsigned v = 0;
  int bits = 0;
  for (unsigned char c : in) {
    v = (v << 8) | c;
    bits += 8;
    while (bits >= 6) out.push_back(t[(v >> (bits -= 6)) & 63]);
  }
  if (bits) out.push_back(t[(v << (6 - bits)) & 63]);
  while (out.size() % 4) out.push_back('=');
  return out;
}

void encode(detail::JsonWriter& w, const Secret& s) {
  detail::key_string(w, "type", s.type);
  if (s.data.empty()) return;
  w.Key("data");
  w.StartObject();
  for (const auto& [k, v] : s.data) {
    detail::write_string(w, k);
    detail::write_string(w, encode_base64(v));
  }
  w.EndObject();
}

}  // namespace

const ResourceType& ResourceTraits<Secret>::type() {
  static const ResourceType t = detail::make_type<Secret>({"", "v1", "secrets", "Secret", true}, decode, encode);
  return t;
}

}  // namespace kinformer::client
