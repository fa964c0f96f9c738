#include "protobuf/wire.h"

#include <algorithm>
#include <limits>

#include "detail/json.h"
#include "detail/sort_keep_last.h"
#include "kinformer/client/protobuf.h"

namespace kinformer::client::detail::pb {
namespace {

const char* wire_type_name(protozero::pbf_wire_type t) {
  switch (t) {
    case protozero::pbf_wire_type::varint:
      return "wire type varint";
    case protozero::pbf_wire_type::fixed64:
      return "wire type fixed64";
    case protozero::pbf_wire_type::length_delimited:
      return "wire type length-delimited";
    case protozero::pbf_wire_type::fixed32:
      return "wire type fixed32";
    default:
      return "an unknown wire type";
  }
}

}  // namespace

void Decoder::fail(const FieldPath& at, const char* name, std::string_view what) {
  if (error_) return;
  std::string field = at.to_string();
  if (name) {
    if (!field.empty()) field += '.';
    field += name;
  }
  std::string message(kind_);
  if (object_ && !(object_->metadata.name.empty() && object_->metadata.namespace_.empty())) {
    message += ' ';
    message += object_->key();
  }
  message += ": ";
  message += field.empty() ? std::string("object") : field;
  message += ": ";
  message += what;
  error_ = Error::make(Errc::decode, std::move(message));
}

Status Decoder::status() && {
  if (error_) return std::move(*error_);
  return Ok{};
}

bool Message::next() {
  if (d_.failed()) return false;
  try {
    return r_.next();
  } catch (const protozero::exception& e) {
    malformed(e.what());
    return false;
  }
}

void Message::skip() {
  try {
    r_.skip();
  } catch (const protozero::exception& e) {
    malformed(e.what());
  }
}

void Message::malformed(const char* what, const char* name) {
  d_.fail(at_, name, std::string("malformed protobuf (") + what + ")");
}

void Message::wrong_wire_type(const char* name, const char* expected) {
  std::string what = "expected ";
  what += expected;
  what += ", got ";
  what += wire_type_name(r_.wire_type());
  d_.fail(at_, name, what);
}

bool Message::bytes(const char* name, std::string_view& out, const char* expected) {
  if (r_.wire_type() != protozero::pbf_wire_type::length_delimited) {
    std::string e = std::string(expected) + " (length-delimited)";
    wrong_wire_type(name, e.c_str());
    return false;
  }
  try {
    protozero::data_view v = r_.get_view();
    out = std::string_view(v.data(), v.size());
    return true;
  } catch (const protozero::exception& e) {
    malformed(e.what(), name);
    return false;
  }
}

bool Message::string(const char* name, std::string& out) {
  std::string_view v;
  if (!bytes(name, v, "a string")) return false;
  out.assign(v);
  return true;
}

template <typename T>
bool Message::string_as(const char* name, T& out) {
  std::string_view v;
  if (!bytes(name, v, "a string")) return false;
  out = T(v);
  return true;
}

bool Message::string(const char* name, InternedString& out) { return string_as(name, out); }
bool Message::string(const char* name, Uid& out) { return string_as(name, out); }

bool Message::varint(const char* name, const char* expected, std::uint64_t& out) {
  if (r_.wire_type() != protozero::pbf_wire_type::varint) {
    wrong_wire_type(name, expected);
    return false;
  }
  try {
    out = r_.get_uint64();
    return true;
  } catch (const protozero::exception& e) {
    malformed(e.what(), name);
    return false;
  }
}

bool Message::boolean(const char* name, bool& out) {
  std::uint64_t v = 0;
  if (!varint(name, "a boolean (varint)", v)) return false;
  out = v != 0;
  return true;
}

bool Message::int32(const char* name, std::int32_t& out) {
  std::uint64_t v = 0;
  if (!varint(name, "a 32-bit integer (varint)", v)) return false;
  auto s = static_cast<std::int64_t>(v);
  if (s < std::numeric_limits<std::int32_t>::min() ||
      s > std::numeric_limits<std::int32_t>::max()) {
    d_.fail(at_, name, "expected a 32-bit integer, got a larger varint");
    return false;
  }
  out = static_cast<std::int32_t>(s);
  return true;
}

bool Message::int64(const char* name, std::int64_t& out) {
  std::uint64_t v = 0;
  if (!varint(name, "a 64-bit integer (varint)", v)) return false;
  out = static_cast<std::int64_t>(v);
  return true;
}

namespace {

bool map_value_into(Message& e, std::string& out) { return e.string("value", out); }
bool map_value_into(Message& e, InternedString& out) {
  std::string_view v;
  if (!e.bytes("value", v, "a string")) return false;
  out = detail::map_value(v);  // long values unpooled, as in the JSON decoder
  return true;
}

template <typename Map>
bool map_entry_into(Message& m, const char* name, Map& out) {
  std::string_view entry;
  if (!m.message(name, entry)) return false;
  // The key names the entry in errors (a key is never secret; a value may be).
  const FieldPath entry_at = m.at().child(name);
  Message e(m.decoder(), entry, entry_at);
  auto& kv = out.emplace_back();
  while (e.next()) {
    switch (e.tag()) {
      case 1:
        e.string("key", kv.first);
        break;
      case 2:
        map_value_into(e, kv.second);
        break;
      default:
        e.skip();
    }
  }
  return !m.decoder().failed();
}

template <typename Map>
void finish_map_of(Map& map) {
  if (map.size() > 1) detail::sort_keep_last(map);
  map.shrink_to_fit();  // grown by doubling while read; kept for as long as the object is cached
}

}  // namespace

bool map_entry(Message& m, const char* name, StringMap& out) {
  return map_entry_into(m, name, out);
}
bool map_entry(Message& m, const char* name, ByteEntries& out) {
  return map_entry_into(m, name, out);
}
void finish_map(StringMap& map) { finish_map_of(map); }

Result<Envelope> parse_envelope(std::string_view bytes, std::string_view what) {
  auto fail = [&](std::string_view why) {
    return Error::make(Errc::decode, std::string(what) + ": " + std::string(why));
  };
  if (bytes.empty()) return fail("empty protobuf body");
  if (!bytes.starts_with(kProtobufMagic)) {
    return fail("not a Kubernetes protobuf message (no k8s\\0 prefix)");
  }
  if (bytes.size() == kProtobufMagic.size()) {
    return fail("empty protobuf message after the k8s\\0 prefix");
  }
  bytes.remove_prefix(kProtobufMagic.size());
  Envelope env;
  Decoder d("runtime.Unknown", nullptr);
  const FieldPath root;
  Message m(d, bytes, root);
  while (m.next()) {
    switch (m.tag()) {
      case 1: {
        std::string_view type_meta;
        if (!m.message("typeMeta", type_meta)) break;
        const FieldPath type_at = root.child("typeMeta");
        Message t(d, type_meta, type_at);
        while (t.next()) {
          switch (t.tag()) {
            case 1:
              t.bytes("apiVersion", env.api_version, "a string");
              break;
            case 2:
              t.bytes("kind", env.kind, "a string");
              break;
            default:
              t.skip();
          }
        }
        break;
      }
      case 2:
        m.bytes("raw", env.raw);
        break;
      case 3:
        m.bytes("contentEncoding", env.content_encoding, "a string");
        break;
      case 4:
        m.bytes("contentType", env.content_type, "a string");
        break;
      default:
        m.skip();
    }
  }
  if (auto s = std::move(d).status(); !s) return fail(s.error().message);
  if (!env.content_encoding.empty()) {
    // No encoding is defined (the API server never sets one); decoding such bytes as protobuf
    // would report nonsense. The name is the server's, not a secret: keep a short prefix.
    return fail("unsupported contentEncoding \"" + std::string(env.content_encoding.substr(0, 32)) +
                "\"");
  }
  return env;
}

Status expect_kind(const Envelope& envelope, std::string_view kind, std::string_view what) {
  if (envelope.kind.empty() || envelope.kind == kind) return Ok{};
  return Error::make(Errc::decode, std::string(what) + ": expected kind " + std::string(kind) +
                                       ", got \"" + std::string(envelope.kind.substr(0, 64)) +
                                       "\"");
}

}  // namespace kinformer::client::detail::pb
