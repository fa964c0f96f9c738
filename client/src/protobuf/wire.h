#pragma once
// Private: reading protobuf with protozero, one field at a time, straight into the models.
//
// Why protozero and not generated code (protoc / protobuf-c++): kinformer keeps a few dozen of
// the hundreds of fields of a Pod; generated classes would parse every field into message
// objects first and then be copied into the models (the intermediate objects the JSON path
// avoids too). protozero (Debian libprotozero-dev, header only) is a cursor over the bytes:
// strings are views into the body until a model keeps them. docs/protobuf.md says more.
//
// protozero checks wire types only with assertions (off in release builds), so every typed read
// here checks the wire type itself and records an error naming the field; protozero's
// exceptions (bytes that are not protobuf) are caught here and become errors naming the message.

#include <protozero/pbf_reader.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "detail/fields.h"
#include "kinformer/client/object.h"
#include "kinformer/client/result.h"

namespace kinformer::client::detail::pb {

/// Collects the first error of one decode call; messages are prefixed "<Kind> <key>: " like
/// the JSON FieldReader's. Not thread-safe; one per decode call, on the stack.
class Decoder {
 public:
  /// `object` (may be null) names the object in messages; its metadata may fill in as decoding
  /// goes.
  Decoder(std::string_view kind, const Object* object) : kind_(kind), object_(object) {}

  /// Records "<field>: <what>" unless an error is recorded already.
  void fail(const FieldPath& at, const char* name, std::string_view what);
  [[nodiscard]] bool failed() const noexcept { return error_.has_value(); }
  /// Ok, or the first recorded error (Errc::decode).
  [[nodiscard]] Status status() &&;

 private:
  std::string_view kind_;
  const Object* object_;
  std::optional<Error> error_;
};

/// One message being read. Loop with next(); for each field switch on tag() and call one typed
/// read (which checks the wire type) or skip(). After an error every call returns false.
class Message {
 public:
  Message(Decoder& decoder, std::string_view bytes, const FieldPath& at)
      : d_(decoder), r_(bytes.data(), bytes.size()), at_(at) {}

  /// The next field; false at the end of the message or once an error is recorded.
  bool next();
  [[nodiscard]] std::uint32_t tag() const noexcept { return r_.tag(); }
  [[nodiscard]] const FieldPath& at() const noexcept { return at_; }
  [[nodiscard]] Decoder& decoder() noexcept { return d_; }
  /// Skips a field this decoder does not keep (unknown fields included).
  void skip();

  /// A string field (wire type 2) into `out`.
  bool string(const char* name, std::string& out);
  bool string(const char* name, InternedString& out);
  bool string(const char* name, Uid& out);
  /// A bytes, string or embedded message field (wire type 2) as a view into the input.
  bool bytes(const char* name, std::string_view& out, const char* expected = "bytes");
  /// A nested message field: its bytes, to read with a Message at at().child(name).
  bool message(const char* name, std::string_view& out) { return bytes(name, out, "a message"); }
  /// A bool field (varint; any non-zero value is true, as in Go).
  bool boolean(const char* name, bool& out);
  /// An int32 field (varint, sign-extended to 64 bits when negative); outside int32 is an error.
  bool int32(const char* name, std::int32_t& out);
  /// An int64 field (varint).
  bool int64(const char* name, std::int64_t& out);

 private:
  template <typename T>
  bool string_as(const char* name, T& out);
  bool varint(const char* name, const char* expected, std::uint64_t& out);
  void wrong_wire_type(const char* name, const char* expected);
  void malformed(const char* what, const char* name = nullptr);

  Decoder& d_;
  protozero::pbf_reader r_;
  const FieldPath& at_;
};

/// A nested message field `name`: calls decode(Message&) on it, at at().child(name).
template <typename F>
void nested(Message& m, const char* name, F&& decode) {
  std::string_view bytes;
  if (!m.message(name, bytes)) return;
  const FieldPath at = m.at().child(name);
  Message sub(m.decoder(), bytes, at);
  decode(sub);
}

/// One element of a repeated message field `name`: appends to `out` and calls
/// decode(Message&, T&) on it, at at().child(name)[out.size()].
template <typename T, typename F>
void repeated(Message& m, const char* name, std::vector<T>& out, F&& decode) {
  std::string_view bytes;
  if (!m.message(name, bytes)) return;
  const FieldPath list_at = m.at().child(name);
  const FieldPath at = list_at.element(out.size());
  Message sub(m.decoder(), bytes, at);
  decode(sub, out.emplace_back());
}

/// A map<string, string> / map<string, bytes> entry message {key = 1, value = 2} at
/// at().child(name); appended to `out`. For a StringMap, call finish_map() when the parent
/// message ends; ByteEntries become a ByteMap, which sorts them the same way.
using ByteEntries = std::vector<std::pair<std::string, std::string>>;
bool map_entry(Message& m, const char* name, StringMap& out);
bool map_entry(Message& m, const char* name, ByteEntries& out);
/// Sorts a map read with map_entry() by key; of duplicate keys the last one wins (protobuf's
/// rule for maps, and Go's unmarshalling).
void finish_map(StringMap& map);

/// The parts of a runtime.Unknown (k8s.io/apimachinery pkg/runtime/generated.proto:
/// Unknown{typeMeta = 1 TypeMeta{apiVersion = 1, kind = 2}, raw = 2, contentEncoding = 3,
/// contentType = 4}); views into the parsed bytes.
struct Envelope {
  std::string_view api_version;
  std::string_view kind;
  std::string_view raw;
  std::string_view content_encoding;
  std::string_view content_type;
};

/// Parses `bytes` = kProtobufMagic + runtime.Unknown. `what` prefixes errors ("pods list
/// response"). Errc::decode: empty, no magic, malformed, or a contentEncoding (none is defined).
Result<Envelope> parse_envelope(std::string_view bytes, std::string_view what);

/// Checks the envelope's typeMeta.kind (empty is accepted: Go fills in the expected kind too).
Status expect_kind(const Envelope& envelope, std::string_view kind, std::string_view what);

}  // namespace kinformer::client::detail::pb
