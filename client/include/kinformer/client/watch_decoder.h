#pragma once
// Incremental decoder for a watch response body: newline-delimited JSON WatchEvents, fed in
// arbitrary pieces (HTTP chunks need not align with events, nor with UTF-8 sequences).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kinformer/client/resource.h"
#include "kinformer/client/result.h"
#include "kinformer/client/watch.h"

namespace kinformer::client {

/// Decodes {"type":..,"object":..}\n lines with RapidJSON (in situ, in a reused buffer) into
/// WatchEvents whose objects come from the resource's Codec. Only complete lines are decoded, so
/// a half-decoded object is never produced. Memory is bounded by the largest event, and between
/// events the line buffer keeps at most kKeptBufferBytes.
/// Thread-safety: not thread-safe; one decoder per stream, used by one thread at a time.
class WatchDecoder {
 public:
  /// Line buffer capacity kept between events; a larger one (after an event that big) is
  /// released once the event is decoded.
  static constexpr std::size_t kKeptBufferBytes = std::size_t{1} << 20;

  struct Options {
    /// Largest accepted event line (bytes, without the newline); larger -> Errc::too_large.
    std::size_t max_event_bytes = std::size_t{16} << 20;
  };

  explicit WatchDecoder(std::shared_ptr<const Codec> codec);
  WatchDecoder(std::shared_ptr<const Codec> codec, Options options);
  ~WatchDecoder();
  WatchDecoder(const WatchDecoder&) = delete;
  WatchDecoder& operator=(const WatchDecoder&) = delete;

  /// Consumes `bytes`, appending every event completed by them to `out`. On failure, events
  /// decoded before the failing line are still in `out` and the error is returned:
  ///  - an ERROR event: Errc::api with the Status code/reason/message/retry-after (410 Expired,
  ///    504 "too large resource version" with retry after 1 s ...); when its object is of
  ///    another kind, Errc::api with HTTP 500 and a message saying so (nothing of the object);
  ///  - a malformed line or unknown event type: Errc::decode naming the byte offset;
  ///  - a line nested deeper than kMaxJsonDepth, or with anything but whitespace after the
  ///    event's JSON object: Errc::decode saying so;
  ///  - an event longer than max_event_bytes: Errc::too_large.
  /// After a failure the decoder is finished: later calls return the same error.
  Status feed(std::string_view bytes, std::vector<WatchEvent>& out);

  /// The body ended. Ok when it ended on an event boundary, Errc::truncated when a partial
  /// event was pending.
  Status finish();

  /// Bytes consumed so far.
  [[nodiscard]] std::uint64_t offset() const noexcept { return offset_; }
  /// Bytes of the complete lines consumed so far (offset() without a pending partial line).
  [[nodiscard]] std::uint64_t complete_line_bytes() const noexcept { return line_start_; }
  /// Events decoded so far.
  [[nodiscard]] std::uint64_t events() const noexcept { return events_; }
  /// Capacity of the line buffer (for tests and diagnostics): at most kKeptBufferBytes between
  /// events.
  [[nodiscard]] std::size_t buffer_capacity() const noexcept { return line_.capacity(); }

 private:
  Status decode_line(char* line, std::size_t size, std::uint64_t line_offset,
                     std::vector<WatchEvent>& out);

  struct Parser;
  std::shared_ptr<const Codec> codec_;
  Options options_;
  std::unique_ptr<Parser> parser_;
  std::string line_;  // the partial line carried between feeds (and the in-situ buffer)
  std::uint64_t offset_ = 0;
  std::uint64_t line_start_ = 0;
  std::uint64_t events_ = 0;
  std::optional<Error> failed_;
};

}  // namespace kinformer::client
