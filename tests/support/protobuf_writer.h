#pragma once
// Test support (shared by the client and informer tests): builds Kubernetes protobuf bytes
// readably with protozero's pbf_writer, so tests say which field they write
// (`Msg().str(1, "name")`) instead of holding opaque binaries.

#include <protozero/pbf_writer.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace kinformer::testing {

/// One protobuf message, built field by field. Copyable value.
class Msg {
 public:
  Msg& str(std::uint32_t tag, std::string_view v) {
    w().add_string(tag, v.data(), v.size());
    return *this;
  }
  Msg& bytes(std::uint32_t tag, std::string_view v) { return str(tag, v); }
  Msg& varint(std::uint32_t tag, std::uint64_t v) {
    w().add_uint64(tag, v);
    return *this;
  }
  Msg& int32(std::uint32_t tag, std::int32_t v) {
    w().add_int32(tag, v);
    return *this;
  }
  Msg& int64(std::uint32_t tag, std::int64_t v) {
    w().add_int64(tag, v);
    return *this;
  }
  Msg& boolean(std::uint32_t tag, bool v) {
    w().add_bool(tag, v);
    return *this;
  }
  Msg& fixed32(std::uint32_t tag, std::uint32_t v) {
    w().add_fixed32(tag, v);
    return *this;
  }
  Msg& fixed64(std::uint32_t tag, std::uint64_t v) {
    w().add_fixed64(tag, v);
    return *this;
  }
  Msg& msg(std::uint32_t tag, const Msg& m) { return str(tag, m.data()); }
  /// A map<string, string> (or map<string, bytes>) entry {key = 1, value = 2}.
  Msg& entry(std::uint32_t tag, std::string_view key, std::string_view value) {
    return msg(tag, Msg().str(1, key).str(2, value));
  }
  /// Unknown fields of every wire type (tags a Kubernetes message does not use).
  Msg& unknown() {
    return varint(900, 7)
        .fixed32(901, 1)
        .fixed64(902, 2)
        .str(903, "unknown")
        .msg(904, Msg().str(1, "x"));
  }
  /// Raw bytes appended as they are (to write malformed messages).
  Msg& raw(std::string_view bytes) {
    data_.append(bytes);
    return *this;
  }

  [[nodiscard]] const std::string& data() const { return data_; }

 private:
  protozero::pbf_writer w() { return protozero::pbf_writer(data_); }
  std::string data_;
};

/// "k8s\0" + runtime.Unknown{typeMeta{apiVersion, kind}, raw}.
inline std::string envelope(std::string_view api_version, std::string_view kind, const Msg& raw) {
  return std::string("k8s\0", 4) +
         Msg().msg(1, Msg().str(1, api_version).str(2, kind)).str(2, raw.data()).data();
}

/// A 4-byte big-endian length, then `payload`.
inline std::string frame(std::string_view payload) {
  auto n = static_cast<std::uint32_t>(payload.size());
  std::string out;
  out.push_back(static_cast<char>(n >> 24));
  out.push_back(static_cast<char>(n >> 16));
  out.push_back(static_cast<char>(n >> 8));
  out.push_back(static_cast<char>(n));
  return out.append(payload);
}

/// One watch frame: a bare WatchEvent{type, object = RawExtension{raw = object_envelope}}, as
/// the API server's raw stream serializer writes it (no k8s\0, no envelope around the event).
inline std::string watch_frame(std::string_view type, const std::string& object_envelope) {
  return frame(Msg().str(1, type).msg(2, Msg().bytes(1, object_envelope)).data());
}

}  // namespace kinformer::testing
