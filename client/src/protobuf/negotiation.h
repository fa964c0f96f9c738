#pragma once
// Private: choosing the encoding of list and watch responses. Typed resources ask for protobuf
// first and JSON second; the response's Content-Type says which one the server chose (a server
// or proxy may answer JSON anyway), and the body is decoded by it.

#include <cctype>
#include <memory>
#include <optional>
#include <string_view>

#include "kinformer/client/protobuf.h"
#include "kinformer/client/protobuf_watch_decoder.h"
#include "kinformer/client/watch_decoder.h"

namespace kinformer::client::detail::pb {

/// Accept header of a list of a typed resource.
inline constexpr std::string_view kListAccept =
    "application/vnd.kubernetes.protobuf, application/json";
/// Accept header of a watch of a typed resource.
inline constexpr std::string_view kWatchAccept =
    "application/vnd.kubernetes.protobuf;stream=watch, application/json";

/// True when `content_type` is application/vnd.kubernetes.protobuf, with or without parameters
/// (";stream=watch"); case-insensitive, as media types are.
inline bool is_protobuf(std::string_view content_type) {
  while (!content_type.empty() && (content_type.front() == ' ' || content_type.front() == '\t')) {
    content_type.remove_prefix(1);
  }
  if (content_type.size() < kProtobufContentType.size()) return false;
  for (std::size_t i = 0; i < kProtobufContentType.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(content_type[i])) != kProtobufContentType[i]) {
      return false;
    }
  }
  std::string_view rest = content_type.substr(kProtobufContentType.size());
  return rest.empty() || rest.front() == ';' || rest.front() == ' ' || rest.front() == '\t';
}

/// The protobuf codec of a resource's JSON codec (nullptr: JSON only).
inline ProtobufCodecPtr protobuf_codec_of(const std::shared_ptr<const Codec>& codec) {
  return protobuf_codec(ResourceType{{}, codec});
}

/// A watch body decoder for the response's Content-Type: ProtobufWatchDecoder when the server
/// answered protobuf (and the resource has a protobuf codec), else the JSON WatchDecoder. The
/// same interface as both. Not thread-safe, like them.
class WatchBodyDecoder {
 public:
  WatchBodyDecoder(std::shared_ptr<const Codec> codec, std::string_view content_type,
                   std::size_t max_event_bytes) {
    ProtobufCodecPtr pb = is_protobuf(content_type) ? protobuf_codec_of(codec) : nullptr;
    if (pb) {
      protobuf_.emplace(std::move(pb), ProtobufWatchDecoder::Options{max_event_bytes});
    } else {
      json_.emplace(std::move(codec), WatchDecoder::Options{max_event_bytes});
    }
  }

  Status feed(std::string_view bytes, std::vector<WatchEvent>& out) {
    return protobuf_ ? protobuf_->feed(bytes, out) : json_->feed(bytes, out);
  }
  Status finish() { return protobuf_ ? protobuf_->finish() : json_->finish(); }
  [[nodiscard]] std::uint64_t offset() const noexcept {
    return protobuf_ ? protobuf_->offset() : json_->offset();
  }
  /// Bytes of the complete events consumed so far (lines or frames).
  [[nodiscard]] std::uint64_t complete_bytes() const noexcept {
    return protobuf_ ? protobuf_->complete_frame_bytes() : json_->complete_line_bytes();
  }

 private:
  std::optional<WatchDecoder> json_;
  std::optional<ProtobufWatchDecoder> protobuf_;
};

}  // namespace kinformer::client::detail::pb
