#include "kinformer/client/secret.h"

#include <string>
#include <utility>
#include <vector>

#include "detail/base64.h"
#include "detail/fields.h"
#include "detail/typed_codec.h"

namespace kinformer::client {
namespace {

using detail::FieldPath;
using detail::FieldReader;

Status decode(const JsonValue& v, Secret& s) {
  FieldReader r("Secret", s);
  const FieldPath root;
  r.string(v, root, "type", s.type);
  const JsonValue* data = r.object(v, root, "data");
  if (!data || r.failed()) return std::move(r).status();
  const FieldPath data_at = root.child("data");
  std::vector<std::pair<std::string, std::string>> entries;
  entries.reserve(data->MemberCount());
  struct Wipe {  // the values decoded so far, when a later key fails
    std::vector<std::pair<std::string, std::string>>& entries;
    ~Wipe() { wipe_values(entries); }
  } wipe{entries};
  for (auto it = data->MemberBegin(); it != data->MemberEnd(); ++it) {
    const FieldPath key_at = data_at.child(it->name.GetString());
    std::string_view encoded;  // null reads as an empty value
    if (!it->value.IsNull()) {
      if (!r.expect_string(it->value, key_at)) return std::move(r).status();
      encoded = detail::view(it->value);
    }
    auto bytes = detail::base64_decode(encoded);
    if (!bytes) {
      // Name the key, never the value.
      return detail::decode_error("Secret " + s.key() + ": " + key_at.to_string() +
                                  ": not valid base64");
    }
    entries.emplace_back(std::string(detail::view(it->name)), std::move(*bytes));
  }
  s.data = ByteMap(std::move(entries));
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
  static const ResourceType t =
      detail::make_type<Secret>({"", "v1", "secrets", "Secret", true}, decode, encode);
  return t;
}

}  // namespace kinformer::client
