#pragma once
// Incremental decoder for a protobuf watch response body
// (application/vnd.kubernetes.protobuf;stream=watch), fed in arbitrary pieces. The protobuf
// counterpart of WatchDecoder, with the same interface, limits and errors.

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kinformer/client/protobuf.h"
#include "kinformer/client/result.h"
#include "kinformer/client/watch.h"

namespace kinformer::client {

/// Decodes length-delimited frames (a 4-byte big-endian length, then that many bytes), each a
/// bare meta.v1.WatchEvent message {type = 1, object = 2 RawExtension{raw = 1}} (no magic, no
/// envelope: the API server frames events with its raw protobuf serializer), whose object.raw
/// is kProtobufMagic + runtime.Unknown around the object (or a Status for ERROR). Only complete
/// frames are decoded, so a half-decoded object is never produced; a frame that arrives whole in
/// one feed() is decoded in place, without a copy. Memory is bounded by the largest frame, and
/// between frames the buffer keeps at most kKeptBufferBytes.
/// Thread-safety: not thread-safe; one decoder per stream, used by one thread at a time.
class ProtobufWatchDecoder {
 public:
  /// Buffer capacity kept between frames; a larger one (after a frame that big arrived in
  /// pieces) is released once the frame is decoded.
  static constexpr std::size_t kKeptBufferBytes = std::size_t{1} << 20;

  struct Options {
    /// Largest accepted frame (bytes, without the 4-byte length); larger -> Errc::too_large,
    /// reported as soon as the length is read.
    std::size_t max_event_bytes = std::size_t{16} << 20;
  };

  explicit ProtobufWatchDecoder(ProtobufCodecPtr codec);
  ProtobufWatchDecoder(ProtobufCodecPtr codec, Options options);

  /// Consumes `bytes`, appending every event completed by them to `out`. On failure, events
  /// decoded before the failing frame are still in `out` and the error is returned:
  ///  - an ERROR event: Errc::api with the Status code/reason/message/retry-after; when its
  ///    object is of another kind, Errc::api with HTTP 500 and a message saying so (as the JSON
  ///    WatchDecoder does);
  ///  - a malformed frame (not protobuf, a known field of the wrong wire type, an object without
  ///    the k8s\0 prefix or of another kind, an unknown event type, no object, an empty frame):
  ///    Errc::decode naming the byte offset;
  ///  - a frame longer than max_event_bytes: Errc::too_large.
  /// After a failure the decoder is finished: later calls return the same error.
  Status feed(std::string_view bytes, std::vector<WatchEvent>& out);

  /// The body ended. Ok when it ended on a frame boundary, Errc::truncated inside a frame
  /// (or inside its length).
  Status finish();

  /// Bytes consumed so far.
  [[nodiscard]] std::uint64_t offset() const noexcept { return offset_; }
  /// Bytes of the complete frames consumed so far (offset() without a pending partial frame).
  [[nodiscard]] std::uint64_t complete_frame_bytes() const noexcept { return frame_start_; }
  /// Events decoded so far.
  [[nodiscard]] std::uint64_t events() const noexcept { return events_; }
  /// Capacity of the buffer that carries a partial frame between feeds (for tests and
  /// diagnostics): at most kKeptBufferBytes between frames.
  [[nodiscard]] std::size_t buffer_capacity() const noexcept { return frame_.capacity(); }

 private:
  Status decode_frame(std::string_view frame, std::uint64_t frame_offset,
                      std::vector<WatchEvent>& out);

  ProtobufCodecPtr codec_;
  Options options_;
  std::array<unsigned char, 4> header_{};
  std::size_t header_size_ = 0;        // bytes of the length read so far (0..4)
  std::optional<std::size_t> length_;  // the current frame's length, once its header is complete
  std::string frame_;                  // the partial frame carried between feeds
  std::uint64_t offset_ = 0;
  std::uint64_t frame_start_ = 0;
  std::uint64_t events_ = 0;
  std::optional<Error> failed_;
};

}  // namespace kinformer::client
