#pragma once
// Incremental decoder for a protobuf LIST response body (application/vnd.kubernetes.protobuf),
// fed in arbitrary pieces as it arrives. The streaming counterpart of decode_protobuf_list().

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kinformer/client/protobuf.h"
#include "kinformer/client/result.h"
#include "kinformer/client/watch.h"

namespace kinformer::client {

/// Reads kProtobufMagic + runtime.Unknown{typeMeta = 1, raw = 2, contentEncoding = 3,
/// contentType = 4} whose raw is <Kind>List{metadata = 1 ListMeta, items = 2 repeated <Kind>}
/// field by field as the bytes arrive (tags and lengths may be split across pieces). Each item
/// is decoded with the codec as soon as its bytes are complete, in place when they arrived in
/// one piece, else from a reused buffer that is then released; unknown fields (of the envelope
/// and of the list) are skipped without being buffered.
///
/// Memory: the decoded objects plus one item's bytes (at most max_item_bytes); between items
/// the buffer keeps at most kKeptBufferBytes. Never the whole body.
///
/// Errors are decode_protobuf_list()'s, with the same messages ("pods list response: ...",
/// "pods list item 3: Pod ns/p: ..."), with these differences, all for bodies the API server
/// never sends: an item that fails is reported at once (the whole-body decoder reported an
/// envelope error after the list first, e.g. a contentEncoding, which comes after raw); a body
/// without a raw field is an error (the whole-body decoder returned an empty list: a body cut
/// after the typeMeta would otherwise be a silent empty list); a second raw field is an error
/// (protobuf's last-one-wins cannot be undone once items are out), and so is anything wrong in
/// the first raw of such a body, which is decoded before the second is seen. An item (or ListMeta
/// or typeMeta) longer than max_item_bytes is Errc::too_large, reported when its length is read.
/// After a failure the decoder is finished: later calls return the same error.
/// Thread-safety: not thread-safe; one decoder per response, used by one thread at a time.
class ProtobufListDecoder {
 public:
  /// Buffer capacity kept between items; a larger one (after an item that big arrived in
  /// pieces) is released once the item is decoded.
  static constexpr std::size_t kKeptBufferBytes = std::size_t{1} << 20;

  struct Options {
    /// Largest accepted item (and ListMeta, typeMeta), in bytes; larger -> Errc::too_large.
    std::size_t max_item_bytes = std::size_t{16} << 20;
  };

  explicit ProtobufListDecoder(ProtobufCodecPtr codec);
  ProtobufListDecoder(ProtobufCodecPtr codec, Options options);

  /// Consumes `bytes`, decoding every item they complete.
  Status feed(std::string_view bytes);
  /// The body ended: the list, or the error of a body that ended inside a field. Call once.
  Result<ObjectList> finish();

  /// Bytes consumed so far.
  [[nodiscard]] std::uint64_t offset() const noexcept { return offset_; }
  /// Items decoded so far.
  [[nodiscard]] std::size_t items() const noexcept { return list_.items.size(); }
  /// Capacity of the buffer that carries a partial field between feeds (for tests and
  /// diagnostics): bounded by the largest item, and at most kKeptBufferBytes between items.
  [[nodiscard]] std::size_t buffer_capacity() const noexcept { return buf_.capacity(); }

 private:
  // Where the next byte goes. The envelope's fields and, inside raw, the list's fields are read
  // the same way: a tag, then (length-delimited) a length, then the value, buffered, skipped or
  // (raw) descended into.
  enum class Phase { magic, tag, length, value, skip_bytes, skip_varint };
  enum class Field { none, type_meta, raw, content_encoding, content_type, list_meta, item, other };

  Status fail(Error e);
  Status envelope_error(const char* field, const std::string& what);
  Status list_error(const char* field, const std::string& what);
  Status malformed(const char* field, const char* exception);
  Status on_tag(std::uint64_t key);
  Status on_length(std::uint64_t length);
  Status on_value(std::string_view bytes);
  Status check_kind();
  [[nodiscard]] bool in_raw() const noexcept { return raw_left_.has_value(); }
  void release_buffer();

  ProtobufCodecPtr codec_;
  Options options_;
  std::string resource_;  // "pods"
  std::string what_;      // "pods list response"
  std::string list_kind_;
  ObjectList list_;
  Phase phase_ = Phase::magic;
  Field field_ = Field::none;
  std::uint32_t tag_ = 0;
  int wire_type_ = 0;
  std::uint64_t varint_ = 0;  // the varint being read
  int varint_bytes_ = 0;
  std::uint64_t left_ = 0;                 // bytes of the current value (or skip) still to come
  std::string buf_;                        // a value that arrives in pieces
  std::optional<std::uint64_t> raw_left_;  // inside raw: its bytes still to come
  bool seen_raw_ = false;
  bool kind_checked_ = false;
  std::string kind_;
  std::string content_encoding_;
  std::uint64_t offset_ = 0;
  bool finished_ = false;
  std::optional<Error> failed_;
};

}  // namespace kinformer::client
