#include "kinformer/client/watch_decoder.h"

#include <cstring>

#include "detail/event_type.h"
#include "detail/json.h"
#include "kinformer/client/api_error.h"

namespace kinformer::client {

struct WatchDecoder::Parser : detail::JsonArena {};

WatchDecoder::WatchDecoder(std::shared_ptr<const Codec> codec)
    : WatchDecoder(std::move(codec), Options{}) {}

WatchDecoder::WatchDecoder(std::shared_ptr<const Codec> codec, Options options)
    : codec_(std::move(codec)), options_(options), parser_(std::make_unique<Parser>()) {}

WatchDecoder::~WatchDecoder() = default;

Status WatchDecoder::feed(std::string_view bytes, std::vector<WatchEvent>& out) {
  if (failed_) return *failed_;
  while (!bytes.empty()) {
    const char* nl = static_cast<const char*>(std::memchr(bytes.data(), '\n', bytes.size()));
    std::size_t take = nl ? static_cast<std::size_t>(nl - bytes.data()) : bytes.size();
    if (line_.size() + take > options_.max_event_bytes) {
      failed_ =
          Error::make(Errc::too_large, "watch event at byte offset " + std::to_string(line_start_) +
                                           " exceeds the limit of " +
                                           std::to_string(options_.max_event_bytes) + " bytes");
      return *failed_;
    }
    line_.append(bytes.data(), take);
    offset_ += take;
    if (!nl) break;
    offset_ += 1;
    bytes.remove_prefix(take + 1);
    std::uint64_t start = line_start_;
    line_start_ = offset_;
    if (auto s = decode_line(line_.data(), line_.size(), start, out); !s) {
      failed_ = s.error();
      return *failed_;
    }
    // One large event would otherwise leave every stream holding its capacity (up to
    // max_event_bytes) for good; below the bound it is kept for the next lines.
    if (line_.capacity() > kKeptBufferBytes) {
      std::string().swap(line_);
    } else {
      line_.clear();
    }
  }
  return Ok{};
}

Status WatchDecoder::finish() {
  if (failed_) return *failed_;
  bool blank = line_.find_first_not_of(" \t\r") == std::string::npos;
  if (!blank) {
    failed_ =
        Error::make(Errc::truncated, "watch stream ended inside an event starting at byte offset " +
                                         std::to_string(line_start_));
    return *failed_;
  }
  return Ok{};
}

Status WatchDecoder::decode_line(char* line, std::size_t size, std::uint64_t line_offset,
                                 std::vector<WatchEvent>& out) {
  std::size_t begin = 0;
  while (begin < size && (line[begin] == ' ' || line[begin] == '\t' || line[begin] == '\r')) {
    ++begin;
  }
  if (begin == size) return Ok{};  // blank line (keep-alive)
  auto where = [&] { return "watch event at byte offset " + std::to_string(line_offset); };
  // In situ parsing needs a terminated buffer: std::string keeps one at data()[size()].
  parser_->pool.Clear();
  rapidjson::Document doc(&parser_->pool, 1024, &parser_->stack);
  if (auto e = detail::parse_insitu(doc, line + begin, size - begin, &parser_->stack)) {
    return detail::decode_error(where() + ": " + e->reason + " at byte " +
                                std::to_string(line_offset + begin + e->offset));
  }
  if (!doc.IsObject()) return detail::decode_error(where() + ": not a JSON object");
  std::string_view type = detail::get_string(doc, "type");
  const JsonValue* object = detail::member(doc, "object");
  if (!object || !object->IsObject()) return detail::decode_error(where() + ": missing \"object\"");
  if (type == "ERROR") {
    const std::string_view kind = detail::get_string(*object, "kind");
    if (!kind.empty() && kind != "Status") return detail::error_event_without_status(where());
    return error_from_status(*object);
  }
  const std::optional<EventType> event_type = detail::event_type_of(type);
  if (!event_type) {
    return detail::decode_error(where() + ": unknown event type \"" +
                                std::string(type.substr(0, 32)) + "\"");
  }
  auto decoded = codec_->decode(*object);
  if (!decoded) {
    Error e = std::move(decoded).error();
    e.message = where() + ": " + e.message;
    return e;
  }
  out.push_back(WatchEvent{*event_type, std::move(decoded).value()});
  ++events_;
  return Ok{};
}

}  // namespace kinformer::client
