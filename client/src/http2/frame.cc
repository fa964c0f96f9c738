#include "http2/frame.h"

#include <algorithm>
#include <cassert>
#include <cstdio>

namespace kinformer::client::detail {
namespace {

// Lengths of the fixed fields in a payload (§6).
constexpr std::size_t kPadLengthSize = 1;
constexpr std::size_t kPrioritySize = 5;  // stream dependency (with its E bit) and weight
constexpr std::size_t kRstStreamSize = 4;
constexpr std::size_t kSettingSize = 6;  // 16-bit identifier, 32-bit value
constexpr std::size_t kPingSize = 8;
constexpr std::size_t kGoawayFixedSize = 8;  // last stream id, error code
constexpr std::size_t kWindowUpdateSize = 4;
constexpr std::uint32_t kReservedBit = 0x80000000;

std::uint8_t byte_at(std::string_view in, std::size_t at) {
  return static_cast<std::uint8_t>(in[at]);
}

std::uint32_t read_u32(std::string_view in, std::size_t at) {
  return (std::uint32_t{byte_at(in, at)} << 24) | (std::uint32_t{byte_at(in, at + 1)} << 16) |
         (std::uint32_t{byte_at(in, at + 2)} << 8) | std::uint32_t{byte_at(in, at + 3)};
}

// A 31-bit field after a reserved bit (stream ids, window increments): the bit is ignored.
std::uint32_t read_u31(std::string_view in, std::size_t at) {
  return read_u32(in, at) & ~kReservedBit;
}

void put_u16(std::string& out, std::uint32_t v) {
  out.push_back(static_cast<char>((v >> 8) & 0xff));
  out.push_back(static_cast<char>(v & 0xff));
}

void put_u32(std::string& out, std::uint32_t v) {
  put_u16(out, v >> 16);
  put_u16(out, v & 0xffff);
}

std::string to_hex(std::uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%x", static_cast<unsigned>(v));
  return buf;
}

// "DATA frame on stream 3": how every error about a frame starts.
std::string frame_name(FrameType type, std::uint32_t stream_id) {
  return frame_type_name(type) + " frame on stream " + std::to_string(stream_id);
}

std::string frame_name(const FrameHeader& h) { return frame_name(h.type, h.stream_id); }

// The type and stream of a decoded frame (SETTINGS, PING and GOAWAY are on stream 0, or they
// would not have decoded).
struct TypeAndStream {
  using Result = std::pair<FrameType, std::uint32_t>;
  Result operator()(const DataFrame& f) const { return {FrameType::data, f.stream_id}; }
  Result operator()(const HeadersFrame& f) const { return {FrameType::headers, f.stream_id}; }
  Result operator()(const ContinuationFrame& f) const {
    return {FrameType::continuation, f.stream_id};
  }
  Result operator()(const RstStreamFrame& f) const { return {FrameType::rst_stream, f.stream_id}; }
  Result operator()(const SettingsFrame&) const { return {FrameType::settings, 0}; }
  Result operator()(const PingFrame&) const { return {FrameType::ping, 0}; }
  Result operator()(const GoawayFrame&) const { return {FrameType::goaway, 0}; }
  Result operator()(const WindowUpdateFrame& f) const {
    return {FrameType::window_update, f.stream_id};
  }
  Result operator()(const IgnoredFrame& f) const { return {f.type, f.stream_id}; }
};

Http2Error connection_error(ErrorCode code, const FrameHeader& h, const std::string& what) {
  return Http2Error::connection(code, frame_name(h) + ": " + what);
}

Http2Error frame_size_error(const FrameHeader& h, const std::string& what) {
  return connection_error(ErrorCode::frame_size_error, h, what);
}

// §6: DATA, HEADERS, PRIORITY, RST_STREAM and CONTINUATION belong to a stream.
std::optional<Http2Error> require_stream(const FrameHeader& h) {
  if (h.stream_id != 0) return std::nullopt;
  return connection_error(ErrorCode::protocol_error, h,
                          "this type belongs to a stream, and stream 0 is the connection");
}

// §6: SETTINGS, PING and GOAWAY belong to the connection.
std::optional<Http2Error> require_connection(const FrameHeader& h) {
  if (h.stream_id == 0) return std::nullopt;
  return connection_error(ErrorCode::protocol_error, h,
                          "this type belongs to the connection (stream 0), not to a stream");
}

std::optional<Http2Error> require_length(const FrameHeader& h, std::size_t length) {
  if (h.length == length) return std::nullopt;
  return frame_size_error(h, "payload of " + std::to_string(h.length) + " bytes (must be " +
                                 std::to_string(length) + ")");
}

// What a frame carries after its Pad Length and before its padding (§6.1, §6.2): its payload
// without both when PADDED, the payload itself when not; `fixed` bytes of priority fields
// (HEADERS with PRIORITY) come first in it. Too short a payload for those fields is a
// FRAME_SIZE_ERROR; padding that does not fit in what follows them is a PROTOCOL_ERROR. Both are
// connection errors: DATA counts against the connection's window, HEADERS carries a header block.
Http2Result<std::string_view> strip_padding(const Frame& f, std::size_t fixed) {
  const FrameHeader& h = f.header;
  const std::string size = std::to_string(f.payload.size());
  const std::string fields =
      fixed == 0 ? std::string() : " and " + std::to_string(fixed) + " bytes of priority fields";
  if (!h.has(kFlagPadded)) {
    if (f.payload.size() < fixed) {
      return frame_size_error(h, "PRIORITY, but its payload of " + size +
                                     " bytes has no room for " + std::to_string(fixed) +
                                     " bytes of priority fields");
    }
    return f.payload;
  }
  if (f.payload.size() < kPadLengthSize + fixed) {
    return frame_size_error(
        h, "PADDED, but its payload of " + size + " bytes has no room for the Pad Length" + fields);
  }
  const std::size_t pad = byte_at(f.payload, 0);
  if (pad > f.payload.size() - kPadLengthSize - fixed) {
    return connection_error(ErrorCode::protocol_error, h,
                            "padding of " + std::to_string(pad) + " bytes does not fit in its " +
                                size + "-byte payload after the Pad Length" + fields);
  }
  return f.payload.substr(kPadLengthSize, f.payload.size() - kPadLengthSize - pad);
}

Http2Result<DataFrame> decode_data(const Frame& f) {
  const FrameHeader& h = f.header;
  if (auto e = require_stream(h)) return std::move(*e);
  auto data = strip_padding(f, 0);
  if (!data) return std::move(data).error();
  return DataFrame{h.stream_id, h.has(kFlagEndStream), *data, h.length};
}

Http2Result<HeadersFrame> decode_headers(const Frame& f) {
  const FrameHeader& h = f.header;
  if (auto e = require_stream(h)) return std::move(*e);
  const std::size_t priority = h.has(kFlagPriority) ? kPrioritySize : 0;
  auto body = strip_padding(f, priority);
  if (!body) return std::move(body).error();
  return HeadersFrame{h.stream_id, h.has(kFlagEndStream), h.has(kFlagEndHeaders),
                      body->substr(priority)};
}

Http2Result<IgnoredFrame> decode_priority(const Frame& f) {
  const FrameHeader& h = f.header;
  if (auto e = require_stream(h)) return std::move(*e);
  if (h.length != kPrioritySize) {
    // §6.3: a stream error. The frame says nothing about the connection's state.
    return Http2Error::stream(ErrorCode::frame_size_error, h.stream_id,
                              frame_name(h) + ": payload of " + std::to_string(h.length) +
                                  " bytes (must be " + std::to_string(kPrioritySize) + ")");
  }
  return IgnoredFrame{h.type, h.stream_id};
}

Http2Result<RstStreamFrame> decode_rst_stream(const Frame& f) {
  const FrameHeader& h = f.header;
  if (auto e = require_stream(h)) return std::move(*e);
  if (auto e = require_length(h, kRstStreamSize)) return std::move(*e);
  return RstStreamFrame{h.stream_id, static_cast<ErrorCode>(read_u32(f.payload, 0))};
}

// The range rules of §6.5.2; an unknown id has none (it is dropped).
std::optional<Http2Error> check_setting(const FrameHeader& h, SettingId id, std::uint32_t value) {
  const std::string what = setting_name(id) + " of " + std::to_string(value);
  switch (id) {
    case SettingId::enable_push:
      if (value > 1) {
        return connection_error(ErrorCode::protocol_error, h, what + " (must be 0 or 1)");
      }
      if (value == 1) {
        return connection_error(ErrorCode::protocol_error, h,
                                what + " (a server may only send 0: it cannot receive pushes)");
      }
      return std::nullopt;
    case SettingId::initial_window_size:
      if (value > kMaxWindowSize) {
        return connection_error(ErrorCode::flow_control_error, h,
                                what + " is above 2^31 - 1, the largest flow-control window");
      }
      return std::nullopt;
    case SettingId::max_frame_size:
      if (value < kDefaultMaxFrameSize || value > kMaxFrameSizeLimit) {
        return connection_error(ErrorCode::protocol_error, h,
                                what + " is outside 16384 to 16777215 (2^14 to 2^24 - 1)");
      }
      return std::nullopt;
    case SettingId::header_table_size:
    case SettingId::max_concurrent_streams:
    case SettingId::max_header_list_size:
      return std::nullopt;  // any 32-bit value
  }
  return std::nullopt;
}

bool known_setting(std::uint16_t id) {
  return id >= static_cast<std::uint16_t>(SettingId::header_table_size) &&
         id <= static_cast<std::uint16_t>(SettingId::max_header_list_size);
}

Http2Result<SettingsFrame> decode_settings(const Frame& f) {
  const FrameHeader& h = f.header;
  if (auto e = require_connection(h)) return std::move(*e);
  SettingsFrame settings;
  if (h.has(kFlagAck)) {
    if (h.length != 0) {
      return frame_size_error(
          h, "ACK with a payload of " + std::to_string(h.length) + " bytes (an ACK is empty)");
    }
    settings.ack = true;
    return settings;
  }
  if (h.length % kSettingSize != 0) {
    return frame_size_error(h, "payload of " + std::to_string(h.length) +
                                   " bytes is not a whole number of 6-byte parameters");
  }
  for (std::size_t at = 0; at < f.payload.size(); at += kSettingSize) {
    const auto raw_id =
        static_cast<std::uint16_t>((byte_at(f.payload, at) << 8) | byte_at(f.payload, at + 1));
    const std::uint32_t value = read_u32(f.payload, at + 2);
    if (!known_setting(raw_id)) continue;  // §6.5.2: unknown parameters are ignored
    const auto id = static_cast<SettingId>(raw_id);
    if (auto e = check_setting(h, id, value)) return std::move(*e);
    settings.settings.push_back({id, value});
  }
  return settings;
}

Http2Result<PingFrame> decode_ping(const Frame& f) {
  const FrameHeader& h = f.header;
  if (auto e = require_connection(h)) return std::move(*e);
  if (auto e = require_length(h, kPingSize)) return std::move(*e);
  PingFrame ping;
  ping.ack = h.has(kFlagAck);
  std::copy_n(f.payload.begin(), kPingSize, ping.opaque.begin());
  return ping;
}

Http2Result<GoawayFrame> decode_goaway(const Frame& f) {
  const FrameHeader& h = f.header;
  if (auto e = require_connection(h)) return std::move(*e);
  if (h.length < kGoawayFixedSize) {
    return frame_size_error(h, "payload of " + std::to_string(h.length) +
                                   " bytes is too short for its last stream id and error code "
                                   "(8 bytes)");
  }
  return GoawayFrame{read_u31(f.payload, 0), static_cast<ErrorCode>(read_u32(f.payload, 4)),
                     f.payload.substr(kGoawayFixedSize)};
}

Http2Result<WindowUpdateFrame> decode_window_update(const Frame& f) {
  const FrameHeader& h = f.header;
  if (auto e = require_length(h, kWindowUpdateSize)) return std::move(*e);
  const std::uint32_t increment = read_u31(f.payload, 0);
  if (increment == 0) {
    // §6.9: about a stream's window, a stream error; about the connection's, a connection one.
    const std::string what = frame_name(h) + ": window size increment of 0";
    if (h.stream_id == 0) return Http2Error::connection(ErrorCode::protocol_error, what);
    return Http2Error::stream(ErrorCode::protocol_error, h.stream_id, what);
  }
  return WindowUpdateFrame{h.stream_id, increment};
}

Http2Result<ContinuationFrame> decode_continuation(const Frame& f) {
  const FrameHeader& h = f.header;
  if (auto e = require_stream(h)) return std::move(*e);
  return ContinuationFrame{h.stream_id, h.has(kFlagEndHeaders), f.payload};
}

template <typename T>
Http2Result<DecodedFrame> widen(Http2Result<T> r) {
  if (!r) return std::move(r).error();
  return DecodedFrame(std::move(r).value());
}

}  // namespace

std::string frame_type_name(FrameType type) {
  switch (type) {
    case FrameType::data:
      return "DATA";
    case FrameType::headers:
      return "HEADERS";
    case FrameType::priority:
      return "PRIORITY";
    case FrameType::rst_stream:
      return "RST_STREAM";
    case FrameType::settings:
      return "SETTINGS";
    case FrameType::push_promise:
      return "PUSH_PROMISE";
    case FrameType::ping:
      return "PING";
    case FrameType::goaway:
      return "GOAWAY";
    case FrameType::window_update:
      return "WINDOW_UPDATE";
    case FrameType::continuation:
      return "CONTINUATION";
  }
  return "frame type " + to_hex(static_cast<std::uint8_t>(type));
}

std::string error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::no_error:
      return "NO_ERROR";
    case ErrorCode::protocol_error:
      return "PROTOCOL_ERROR";
    case ErrorCode::internal_error:
      return "INTERNAL_ERROR";
    case ErrorCode::flow_control_error:
      return "FLOW_CONTROL_ERROR";
    case ErrorCode::settings_timeout:
      return "SETTINGS_TIMEOUT";
    case ErrorCode::stream_closed:
      return "STREAM_CLOSED";
    case ErrorCode::frame_size_error:
      return "FRAME_SIZE_ERROR";
    case ErrorCode::refused_stream:
      return "REFUSED_STREAM";
    case ErrorCode::cancel:
      return "CANCEL";
    case ErrorCode::compression_error:
      return "COMPRESSION_ERROR";
    case ErrorCode::connect_error:
      return "CONNECT_ERROR";
    case ErrorCode::enhance_your_calm:
      return "ENHANCE_YOUR_CALM";
    case ErrorCode::inadequate_security:
      return "INADEQUATE_SECURITY";
    case ErrorCode::http_1_1_required:
      return "HTTP_1_1_REQUIRED";
  }
  return "error code " + to_hex(static_cast<std::uint32_t>(code));
}

std::string setting_name(SettingId id) {
  switch (id) {
    case SettingId::header_table_size:
      return "SETTINGS_HEADER_TABLE_SIZE";
    case SettingId::enable_push:
      return "SETTINGS_ENABLE_PUSH";
    case SettingId::max_concurrent_streams:
      return "SETTINGS_MAX_CONCURRENT_STREAMS";
    case SettingId::initial_window_size:
      return "SETTINGS_INITIAL_WINDOW_SIZE";
    case SettingId::max_frame_size:
      return "SETTINGS_MAX_FRAME_SIZE";
    case SettingId::max_header_list_size:
      return "SETTINGS_MAX_HEADER_LIST_SIZE";
  }
  return "setting " + to_hex(static_cast<std::uint16_t>(id));
}

Error Http2Error::to_error() const {
  const std::string where = scope == ErrorScope::connection
                                ? "connection error"
                                : "stream error on stream " + std::to_string(stream_id);
  return Error::make(Errc::decode,
                     "HTTP/2 " + where + " " + error_code_name(code) + ": " + message);
}

// --- FrameHeader -----------------------------------------------------------------------------

FrameHeader FrameHeader::parse(std::string_view bytes) {
  assert(bytes.size() >= kFrameHeaderSize);
  FrameHeader h;
  h.length = (std::uint32_t{byte_at(bytes, 0)} << 16) | (std::uint32_t{byte_at(bytes, 1)} << 8) |
             std::uint32_t{byte_at(bytes, 2)};
  h.type = static_cast<FrameType>(byte_at(bytes, 3));
  h.flags = byte_at(bytes, 4);
  h.stream_id = read_u31(bytes, 5);
  return h;
}

void FrameHeader::append_to(std::string& out) const {
  assert(length <= kMaxFrameSizeLimit);
  assert(stream_id <= kMaxStreamId);
  out.push_back(static_cast<char>((length >> 16) & 0xff));
  put_u16(out, length & 0xffff);
  out.push_back(static_cast<char>(type));
  out.push_back(static_cast<char>(flags));
  put_u32(out, stream_id);
}

// --- FrameReader -----------------------------------------------------------------------------

FrameReader::FrameReader(std::uint32_t max_frame_size) : max_frame_size_(max_frame_size) {
  assert(max_frame_size >= kDefaultMaxFrameSize && max_frame_size <= kMaxFrameSizeLimit);
}

void FrameReader::set_max_frame_size(std::uint32_t max_frame_size) {
  assert(max_frame_size >= kDefaultMaxFrameSize && max_frame_size <= kMaxFrameSizeLimit);
  max_frame_size_ = max_frame_size;
}

std::size_t FrameReader::buffered() const { return handed_out_buffer_ ? 0 : buffer_.size(); }

Http2Result<std::optional<Frame>> FrameReader::read(std::string_view& input) {
  if (failure_) return *failure_;
  if (handed_out_buffer_) {
    // The frame handed out last pointed here, valid until this call. Freed, not kept: between
    // frames an idle connection holds no buffer.
    std::string().swap(buffer_);
    handed_out_buffer_ = false;
  }
  auto take = [&](std::size_t n) {
    const std::size_t k = std::min(n, input.size());
    buffer_.append(input.substr(0, k));
    input.remove_prefix(k);
  };

  if (!header_) {
    if (buffer_.empty() && input.size() >= kFrameHeaderSize) {
      header_ = FrameHeader::parse(input);
      input.remove_prefix(kFrameHeaderSize);
    } else {
      take(kFrameHeaderSize - buffer_.size());
      if (buffer_.size() < kFrameHeaderSize) return std::optional<Frame>();
      header_ = FrameHeader::parse(buffer_);
      buffer_.clear();  // 9 bytes fit in the string itself: nothing to free
    }
    // Checked before any payload is kept: the bound is on what we buffer.
    if (header_->length > max_frame_size_) {
      failure_ = Http2Error::connection(
          ErrorCode::frame_size_error,
          frame_name(*header_) + ": length " + std::to_string(header_->length) +
              " is above our SETTINGS_MAX_FRAME_SIZE (" + std::to_string(max_frame_size_) + ")");
      header_.reset();
      buffer_.clear();
      return *failure_;
    }
  }

  const std::size_t length = header_->length;
  if (buffer_.empty() && input.size() >= length) {
    // The whole payload is in the caller's bytes: no copy.
    Frame frame{*header_, input.substr(0, length)};
    input.remove_prefix(length);
    header_.reset();
    return std::optional<Frame>(frame);
  }
  // What the header announces, up to 64 KiB: more only as the bytes come.
  if (buffer_.empty()) buffer_.reserve(std::min<std::size_t>(length, std::size_t{64} * 1024));
  take(length - buffer_.size());
  if (buffer_.size() < length) return std::optional<Frame>();
  Frame frame{*header_, buffer_};
  header_.reset();
  handed_out_buffer_ = true;
  return std::optional<Frame>(frame);
}

// --- decode_frame ----------------------------------------------------------------------------

Http2Result<DecodedFrame> decode_frame(const Frame& frame) {
  assert(frame.payload.size() == frame.header.length);
  const FrameHeader& h = frame.header;
  switch (h.type) {
    case FrameType::data:
      return widen(decode_data(frame));
    case FrameType::headers:
      return widen(decode_headers(frame));
    case FrameType::priority:
      return widen(decode_priority(frame));
    case FrameType::rst_stream:
      return widen(decode_rst_stream(frame));
    case FrameType::settings:
      return widen(decode_settings(frame));
    case FrameType::push_promise:
      return connection_error(ErrorCode::protocol_error, h,
                              "server push is disabled (we sent SETTINGS_ENABLE_PUSH 0)");
    case FrameType::ping:
      return widen(decode_ping(frame));
    case FrameType::goaway:
      return widen(decode_goaway(frame));
    case FrameType::window_update:
      return widen(decode_window_update(frame));
    case FrameType::continuation:
      return widen(decode_continuation(frame));
  }
  return DecodedFrame(IgnoredFrame{h.type, h.stream_id});  // §5.5: unknown types are ignored
}

// --- PeerSettings ----------------------------------------------------------------------------

void PeerSettings::apply(const SettingsFrame& frame) {
  for (const Setting& s : frame.settings) {
    switch (s.id) {
      case SettingId::header_table_size:
        header_table_size = s.value;
        break;
      case SettingId::enable_push:
        break;  // a server's can only be 0, which is where a client's view of it stays
      case SettingId::max_concurrent_streams:
        max_concurrent_streams = s.value;
        break;
      case SettingId::initial_window_size:
        initial_window_size = s.value;
        break;
      case SettingId::max_frame_size:
        max_frame_size = s.value;
        break;
      case SettingId::max_header_list_size:
        max_header_list_size = s.value;
        break;
    }
  }
}

// --- HeaderBlockAssembler --------------------------------------------------------------------

HeaderBlockAssembler::HeaderBlockAssembler(std::size_t max_block_size)
    : max_block_size_(max_block_size) {}

Http2Status HeaderBlockAssembler::check_sequence(const FrameHeader& header) const {
  return check_sequence(header.type, header.stream_id);
}

Http2Status HeaderBlockAssembler::check_sequence(FrameType type, std::uint32_t stream_id) const {
  const bool continuation = type == FrameType::continuation;
  if (!open_) {
    if (!continuation) return Ok{};
    return Http2Error::connection(
        ErrorCode::protocol_error,
        frame_name(type, stream_id) +
            " outside a header block (it may only follow a HEADERS or CONTINUATION frame "
            "without END_HEADERS)");
  }
  const std::string inside = frame_name(type, stream_id) + " inside the header block of stream " +
                             std::to_string(open_->stream_id);
  if (!continuation) {
    return Http2Error::connection(
        ErrorCode::protocol_error,
        inside + " (only its CONTINUATION frames may come until END_HEADERS)");
  }
  if (stream_id != open_->stream_id) {
    return Http2Error::connection(ErrorCode::protocol_error,
                                  inside + " (its CONTINUATION frames must be on its stream)");
  }
  return Ok{};
}

Http2Result<std::optional<HeaderBlock>> HeaderBlockAssembler::on_frame(const DecodedFrame& frame) {
  const auto [type, stream_id] = std::visit(TypeAndStream{}, frame);
  if (auto s = check_sequence(type, stream_id); !s) return std::move(s).error();
  if (const auto* headers = std::get_if<HeadersFrame>(&frame)) {
    open_ = HeaderBlock{headers->stream_id, headers->end_stream, {}};
    counted_ = 0;
    return add(headers->fragment, headers->end_headers);
  }
  if (const auto* continuation = std::get_if<ContinuationFrame>(&frame)) {
    return add(continuation->fragment, continuation->end_headers);
  }
  return std::optional<HeaderBlock>();
}

Http2Result<std::optional<HeaderBlock>> HeaderBlockAssembler::add(std::string_view fragment,
                                                                  bool end_headers) {
  counted_ += kFrameHeaderSize + fragment.size();
  if (counted_ > max_block_size_) {
    const std::uint32_t stream_id = open_->stream_id;
    open_.reset();
    return Http2Error::connection(
        ErrorCode::enhance_your_calm,
        "header block on stream " + std::to_string(stream_id) + " is larger than " +
            std::to_string(max_block_size_) +
            " bytes (max_block_size, counting its fragments and 9 bytes per frame)");
  }
  open_->block.append(fragment);
  if (!end_headers) return std::optional<HeaderBlock>();
  std::optional<HeaderBlock> done = std::move(open_);
  open_.reset();
  return done;
}

// --- writers ---------------------------------------------------------------------------------

void append_client_preface(std::string& out, const ClientSettings& settings) {
  assert(settings.initial_window_size <= kMaxWindowSize);
  assert(settings.max_frame_size >= kDefaultMaxFrameSize &&
         settings.max_frame_size <= kMaxFrameSizeLimit);
  out.append(kClientPreface);
  const Setting values[] = {
      {SettingId::enable_push, 0},
      {SettingId::initial_window_size, settings.initial_window_size},
      {SettingId::max_frame_size, settings.max_frame_size},
      {SettingId::max_header_list_size, settings.max_header_list_size},
  };
  FrameHeader{static_cast<std::uint32_t>(std::size(values) * kSettingSize), FrameType::settings, 0,
              0}
      .append_to(out);
  for (const Setting& s : values) {
    put_u16(out, static_cast<std::uint16_t>(s.id));
    put_u32(out, s.value);
  }
}

void append_settings_ack(std::string& out) {
  FrameHeader{0, FrameType::settings, kFlagAck, 0}.append_to(out);
}

void append_ping(std::string& out, const PingData& opaque, bool ack) {
  FrameHeader{kPingSize, FrameType::ping, ack ? kFlagAck : std::uint8_t{0}, 0}.append_to(out);
  out.append(opaque.begin(), opaque.end());
}

void append_window_update(std::string& out, std::uint32_t stream_id, std::uint32_t increment) {
  assert(increment >= 1 && increment <= kMaxWindowSize);
  FrameHeader{kWindowUpdateSize, FrameType::window_update, 0, stream_id}.append_to(out);
  put_u32(out, increment);
}

void append_rst_stream(std::string& out, std::uint32_t stream_id, ErrorCode code) {
  assert(stream_id != 0);
  FrameHeader{kRstStreamSize, FrameType::rst_stream, 0, stream_id}.append_to(out);
  put_u32(out, static_cast<std::uint32_t>(code));
}

void append_goaway(std::string& out, std::uint32_t last_stream_id, ErrorCode code,
                   std::string_view debug_data) {
  assert(last_stream_id <= kMaxStreamId);
  debug_data = debug_data.substr(0, kDefaultMaxFrameSize - kGoawayFixedSize);
  FrameHeader{static_cast<std::uint32_t>(kGoawayFixedSize + debug_data.size()), FrameType::goaway,
              0, 0}
      .append_to(out);
  put_u32(out, last_stream_id);
  put_u32(out, static_cast<std::uint32_t>(code));
  out.append(debug_data);
}

void append_headers(std::string& out, std::uint32_t stream_id, std::string_view block,
                    bool end_stream, std::uint32_t max_frame_size) {
  assert(stream_id != 0 && max_frame_size > 0);
  FrameType type = FrameType::headers;
  std::uint8_t flags = end_stream ? kFlagEndStream : 0;
  // At least one frame, even for an empty block; then one per max_frame_size bytes.
  do {
    const std::string_view piece = block.substr(0, max_frame_size);
    block.remove_prefix(piece.size());
    if (block.empty()) flags |= kFlagEndHeaders;
    FrameHeader{static_cast<std::uint32_t>(piece.size()), type, flags, stream_id}.append_to(out);
    out.append(piece);
    type = FrameType::continuation;
    flags = 0;  // CONTINUATION has no END_STREAM: the HEADERS frame carries it for the block
  } while (!block.empty());
}

void append_data(std::string& out, std::uint32_t stream_id, std::string_view data, bool end_stream,
                 std::uint32_t max_frame_size) {
  assert(stream_id != 0 && max_frame_size > 0);
  if (data.empty() && !end_stream) return;
  do {
    const std::string_view piece = data.substr(0, max_frame_size);
    data.remove_prefix(piece.size());
    const std::uint8_t flags = end_stream && data.empty() ? kFlagEndStream : 0;
    FrameHeader{static_cast<std::uint32_t>(piece.size()), FrameType::data, flags, stream_id}
        .append_to(out);
    out.append(piece);
  } while (!data.empty());
}

}  // namespace kinformer::client::detail
