#pragma once
// Incremental decoder for a JSON LIST response body, fed in arbitrary pieces as it arrives:
// the list's items are decoded one by one, never the whole body at once. docs/protobuf.md
// ("Streaming lists") states the memory bound.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "kinformer/client/resource.h"
#include "kinformer/client/result.h"
#include "kinformer/client/watch.h"

namespace kinformer::client {

/// Decodes {"kind":..,"apiVersion":..,"metadata":{"resourceVersion":..,"continue":..},
/// "items":[{..},{..}]} as it arrives. A small scanner follows the top-level object (strings,
/// escapes, nesting); each top-level member value and each element of "items" is captured as
/// its own byte range in a reused buffer and parsed with RapidJSON in situ as soon as it is
/// complete; items go to the resource's Codec at once and their bytes are released. Keys may
/// come in any order; of a repeated key the first counts (as RapidJSON's FindMember); unknown
/// keys are parsed (so they are valid JSON) and dropped; "items": null is an empty list.
///
/// Memory: the decoded objects, plus one value's bytes and DOM (at most max_item_bytes), plus
/// a bracket stack of the nesting depth; between items the buffer keeps at most
/// kKeptBufferBytes. Never the whole body, never a DOM of the whole list.
///
/// Errors are those of a whole-body RapidJSON parse followed by decoding the items (as
/// RestClient decoded lists before), with the byte offset in the whole body:
///  - "<gvr>: list response is not valid JSON: <RapidJSON's reason> at byte K" (Errc::decode),
///    also for a truncated body (finish() inside the object);
///  - "<gvr>: list response is not a JSON object", "<gvr>: list items is not an array";
///  - "<gvr> list item N: <the codec's error>" (its Errc);
///  - a value longer than max_item_bytes: Errc::too_large.
/// Differences, for bodies the API server never sends: an item that fails to decode is reported
/// at once, so a syntax error later in the same body (which the whole-body parse reported
/// instead) is never read; a number run into letters ({"a":12x}) is reported at the same byte
/// with another reason; a body that is not an object is buffered up to max_item_bytes only.
/// After a failure the decoder is finished: later calls return the same error.
/// Thread-safety: not thread-safe; one decoder per response, used by one thread at a time.
class JsonListDecoder {
 public:
  /// Buffer capacity kept between values; a larger one (after an item that big) is released
  /// once the item is decoded.
  static constexpr std::size_t kKeptBufferBytes = std::size_t{1} << 20;

  struct Options {
    /// Largest accepted item (or other top-level value), in bytes; larger -> Errc::too_large.
    std::size_t max_item_bytes = std::size_t{16} << 20;
  };

  explicit JsonListDecoder(ResourceType type);
  JsonListDecoder(ResourceType type, Options options);
  ~JsonListDecoder();
  JsonListDecoder(const JsonListDecoder&) = delete;
  JsonListDecoder& operator=(const JsonListDecoder&) = delete;

  /// Consumes `bytes`, decoding every item they complete.
  Status feed(std::string_view bytes);
  /// The body ended: the list, or the error of a body that ended inside the object. Call once.
  Result<ObjectList> finish();

  /// Bytes consumed so far.
  [[nodiscard]] std::uint64_t offset() const noexcept { return offset_; }
  /// Items decoded so far.
  [[nodiscard]] std::size_t items() const noexcept { return list_.items.size(); }
  /// Capacity of the value buffer (for tests and diagnostics): bounded by the largest value
  /// (item) seen, and at most kKeptBufferBytes between values.
  [[nodiscard]] std::size_t buffer_capacity() const noexcept { return buf_.capacity(); }

 private:
  enum class State {
    start,         // before the top-level value
    key_or_end,    // after '{'
    key,           // after ','
    colon,         // after a key
    value,         // after ':'
    after_member,  // after a member's value
    items_first,   // after "items": [
    item,          // after ',' in items
    after_item,    // after an item
    done,          // after the closing '}'
    not_object,    // the body does not start with '{': buffered to report the parse error
  };
  enum class Capture { none, container, string, scalar };
  enum class Purpose { key, member, item };

  Status fail(Error e);
  Error syntax_error(int rapidjson_code, std::uint64_t at) const;
  Error syntax_error(const std::string& reason, std::uint64_t at) const;
  void start_capture(Capture kind, Purpose purpose, std::uint64_t at);
  Status append(const char* data, std::size_t n);
  Status complete_capture();
  Status finish_scalar();
  Status truncated_error();
  void release_buffer();

  struct Parser;
  ResourceType type_;
  std::string gvr_;
  Options options_;
  std::unique_ptr<Parser> parser_;
  ObjectList list_;
  State state_ = State::start;
  // The value being captured.
  Capture capture_ = Capture::none;
  Purpose purpose_ = Purpose::member;
  std::uint64_t capture_start_ = 0;  // its offset in the body
  std::string buf_;                  // its bytes (and the in-situ buffer)
  std::string stack_;                // '{' / '[' of the open containers in it
  bool in_string_ = false;
  bool escape_ = false;
  int base_depth_ = 0;  // nesting of the captured value in the whole body
  // The top-level member being read.
  enum class Key { other, items, metadata } key_ = Key::other;
  bool seen_items_ = false;
  bool seen_metadata_ = false;
  std::uint64_t offset_ = 0;
  bool finished_ = false;
  std::optional<Error> failed_;
};

}  // namespace kinformer::client
