// The protobuf watch stream. Framing: k8s.io/apimachinery pkg/util/framer/framer.go
// (NewLengthDelimitedFrameWriter: a 4-byte big-endian uint32 length, then the frame), the
// Framer of the protobuf serializer's StreamSerializer (pkg/runtime/serializer/codec_factory.go).
// That StreamSerializer is the *raw* protobuf serializer (protobuf.go, RawSerializer: "without
// adding a runtime.Unknown wrapper"), so a frame is a bare metav1.WatchEvent message, without
// k8s\0 and without an envelope. The event's object is written by the embedded encoder, the
// ordinary protobuf serializer: object.raw is k8s\0 + runtime.Unknown around the object
// (k8s.io/apiserver pkg/endpoints/handlers/watch.go and response.go, watchEncoder.doEncode).
// Found against a real kube-apiserver (the e2e suites): issue 12's and DESIGN.md's "the same
// envelope around a WatchEvent" holds for the object inside, not for the frame.
// WatchEvent {type = 1, object = 2 RawExtension{raw = 1}}: apimachinery
// pkg/apis/meta/v1/generated.proto and pkg/runtime/generated.proto.
#include "kinformer/client/protobuf_watch_decoder.h"

#include "detail/event_type.h"
#include "protobuf/wire.h"

namespace kinformer::client {
namespace {

// Empties the carried-frame buffer. One large event split across reads would otherwise leave
// every stream holding its capacity (up to max_event_bytes) for good; below this it is kept,
// so the usual events reuse it without allocating.
void release_if_large(std::string& buffer) {
  if (buffer.capacity() > ProtobufWatchDecoder::kKeptBufferBytes) {
    std::string().swap(buffer);
  } else {
    buffer.clear();
  }
}

}  // namespace

ProtobufWatchDecoder::ProtobufWatchDecoder(ProtobufCodecPtr codec)
    : ProtobufWatchDecoder(std::move(codec), Options{}) {}

ProtobufWatchDecoder::ProtobufWatchDecoder(ProtobufCodecPtr codec, Options options)
    : codec_(std::move(codec)), options_(options) {}

Status ProtobufWatchDecoder::feed(std::string_view bytes, std::vector<WatchEvent>& out) {
  if (failed_) return *failed_;
  while (!bytes.empty()) {
    if (!length_) {
      std::size_t take = std::min(header_.size() - header_size_, bytes.size());
      for (std::size_t i = 0; i < take; ++i) {
        header_[header_size_ + i] = static_cast<unsigned char>(bytes[i]);
      }
      header_size_ += take;
      offset_ += take;
      bytes.remove_prefix(take);
      if (header_size_ < header_.size()) break;
      header_size_ = 0;
      const std::uint32_t length = (std::uint32_t{header_[0]} << 24) |
                                   (std::uint32_t{header_[1]} << 16) |
                                   (std::uint32_t{header_[2]} << 8) | std::uint32_t{header_[3]};
      if (length > options_.max_event_bytes) {
        failed_ = Error::make(Errc::too_large,
                              "watch event at byte offset " + std::to_string(frame_start_) + " (" +
                                  std::to_string(length) + " bytes) exceeds the limit of " +
                                  std::to_string(options_.max_event_bytes) + " bytes");
        return *failed_;
      }
      if (length == 0) {
        failed_ = Error::make(Errc::decode, "watch event at byte offset " +
                                                std::to_string(frame_start_) + ": an empty frame");
        return *failed_;
      }
      length_ = length;
    }
    std::string_view frame;
    const std::size_t need = *length_ - frame_.size();
    if (frame_.empty() && bytes.size() >= need) {
      frame = bytes.substr(0, need);  // whole in this piece: decoded in place
      offset_ += need;
      bytes.remove_prefix(need);
    } else {
      std::size_t take = std::min(need, bytes.size());
      frame_.append(bytes.data(), take);
      offset_ += take;
      bytes.remove_prefix(take);
      if (frame_.size() < *length_) break;
      frame = frame_;
    }
    const std::uint64_t start = frame_start_;
    frame_start_ = offset_;
    length_.reset();
    Status s = decode_frame(frame, start, out);
    release_if_large(frame_);
    if (!s) {
      failed_ = s.error();
      return *failed_;
    }
  }
  return Ok{};
}

Status ProtobufWatchDecoder::finish() {
  if (failed_) return *failed_;
  if (header_size_ > 0 || length_) {
    failed_ =
        Error::make(Errc::truncated, "watch stream ended inside an event starting at byte offset " +
                                         std::to_string(frame_start_));
    return *failed_;
  }
  return Ok{};
}

Status ProtobufWatchDecoder::decode_frame(std::string_view frame, std::uint64_t frame_offset,
                                          std::vector<WatchEvent>& out) {
  using detail::FieldPath;
  using detail::pb::Decoder;
  using detail::pb::Message;
  // Built on failure only, as most frames decode.
  auto where = [&] { return "watch event at byte offset " + std::to_string(frame_offset); };
  auto at = [&](Error e) {
    e.message = where() + ": " + e.message;
    return e;
  };
  if (frame.starts_with(kProtobufMagic)) {
    // Not a WatchEvent (0x6b would be a group's start): name the mistake instead.
    return Error::make(
        Errc::decode,
        where() + ": a k8s\\0 envelope around the event (frames hold bare WatchEvents)");
  }
  std::string_view type;
  std::optional<std::string_view> object;
  {
    Decoder d("WatchEvent", nullptr);
    const FieldPath root;
    Message m(d, frame, root);
    while (m.next()) {
      switch (m.tag()) {
        case 1:
          m.bytes("type", type, "a string");
          break;
        case 2:
          detail::pb::nested(m, "object", [&](Message& raw_extension) {
            while (raw_extension.next()) {
              std::string_view raw;
              if (raw_extension.tag() == 1) {
                if (raw_extension.bytes("raw", raw)) object = raw;
              } else {
                raw_extension.skip();
              }
            }
          });
          break;
        default:
          m.skip();
      }
    }
    if (auto s = std::move(d).status(); !s) return at(std::move(s).error());
  }
  if (!object) return Error::make(Errc::decode, where() + ": missing \"object\"");
  const std::optional<EventType> event_type = detail::event_type_of(type);
  if (type == "ERROR") {
    auto inner = detail::pb::parse_envelope(*object, "ERROR object");
    if (!inner) return at(std::move(inner).error());
    if (!inner->kind.empty() && inner->kind != "Status") {
      return detail::error_event_without_status(where());
    }
    Error e;
    if (auto s = decode_protobuf_status(inner->raw, e); !s) {
      Error failed = std::move(s).error();
      failed.message = "ERROR object: " + failed.message;
      return at(std::move(failed));
    }
    if (e.message.empty()) e.message = "watch ERROR event";
    return e;
  }
  if (!event_type) {
    return Error::make(
        Errc::decode, where() + ": unknown event type \"" + std::string(type.substr(0, 32)) + "\"");
  }
  auto inner = detail::pb::parse_envelope(*object, "object");
  if (!inner) return at(std::move(inner).error());
  if (auto s = detail::pb::expect_kind(inner.value(), codec_->gvr().kind, "object"); !s) {
    return at(std::move(s).error());
  }
  auto decoded = codec_->decode(inner->raw);
  if (!decoded) return at(std::move(decoded).error());
  out.push_back(WatchEvent{*event_type, std::move(decoded).value()});
  ++events_;
  return Ok{};
}

}  // namespace kinformer::client
