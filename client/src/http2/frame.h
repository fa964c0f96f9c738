#pragma once
// Private: HTTP/2 framing (RFC 9113 §4 and §6) for the client side of a connection, for the
// HTTP/2 transport. Pure code, no I/O: the transport hands in the bytes it read and takes out
// frames, each checked against the rules §6 gives its type; it writes frames into a string it
// then sends.
//
// What this layer checks is what a frame says on its own (length, stream id, fields) and the one
// rule about frames in sequence that belongs to framing: a header block's CONTINUATION frames
// follow its HEADERS with nothing in between (HeaderBlockAssembler). Stream states (§5.1), flow
// control windows (§6.9) and what the header fields mean are the transport's.
//
// The functions are pure (thread-safe); FrameReader and HeaderBlockAssembler hold one
// connection's state and say so.

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "http2/hpack.h"
#include "kinformer/client/error.h"
#include "kinformer/client/result.h"

namespace kinformer::client::detail {

// --- constants (RFC 9113) --------------------------------------------------------------------

/// What a client sends first (§3.4), before its SETTINGS frame (append_client_preface).
inline constexpr std::string_view kClientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// A frame header's size (§4.1): 24-bit length, type, flags, reserved bit and 31-bit stream id.
inline constexpr std::size_t kFrameHeaderSize = 9;

/// Frame types (§6). A type is a byte: values not listed here are extension frames, which a
/// receiver ignores (§5.5), so a FrameType may hold any value.
enum class FrameType : std::uint8_t {
  data = 0x0,
  headers = 0x1,
  priority = 0x2,
  rst_stream = 0x3,
  settings = 0x4,
  push_promise = 0x5,
  ping = 0x6,
  goaway = 0x7,
  window_update = 0x8,
  continuation = 0x9,
};

/// "DATA", "HEADERS", ... as RFC 9113 spells them; "frame type 0xN" for an unknown one.
std::string frame_type_name(FrameType type);

/// Frame flags (§6). Each type defines its own; a flag a type does not define is ignored.
inline constexpr std::uint8_t kFlagEndStream = 0x01;   // DATA, HEADERS
inline constexpr std::uint8_t kFlagAck = 0x01;         // SETTINGS, PING
inline constexpr std::uint8_t kFlagEndHeaders = 0x04;  // HEADERS, PUSH_PROMISE, CONTINUATION
inline constexpr std::uint8_t kFlagPadded = 0x08;      // DATA, HEADERS, PUSH_PROMISE
inline constexpr std::uint8_t kFlagPriority = 0x20;    // HEADERS

/// Error codes (§7), as RST_STREAM and GOAWAY carry them. A peer may send a code not listed
/// here, which means no more than INTERNAL_ERROR would (§7), so an ErrorCode may hold any value.
enum class ErrorCode : std::uint32_t {
  no_error = 0x0,
  protocol_error = 0x1,
  internal_error = 0x2,
  flow_control_error = 0x3,
  settings_timeout = 0x4,
  stream_closed = 0x5,
  frame_size_error = 0x6,
  refused_stream = 0x7,
  cancel = 0x8,
  compression_error = 0x9,
  connect_error = 0xa,
  enhance_your_calm = 0xb,
  inadequate_security = 0xc,
  http_1_1_required = 0xd,
};

/// "NO_ERROR", "PROTOCOL_ERROR", ... as RFC 9113 spells them; "error code 0xN" for an unknown one.
std::string error_code_name(ErrorCode code);

/// SETTINGS parameters (§6.5.2). A peer may send others (extensions), which are ignored.
enum class SettingId : std::uint16_t {
  header_table_size = 0x1,
  enable_push = 0x2,
  max_concurrent_streams = 0x3,
  initial_window_size = 0x4,
  max_frame_size = 0x5,
  max_header_list_size = 0x6,
};

/// "SETTINGS_HEADER_TABLE_SIZE", ...; "setting 0xN" for an unknown one.
std::string setting_name(SettingId id);

/// The settings' initial values (§6.5.2): what holds until a SETTINGS frame says otherwise.
/// SETTINGS_ENABLE_PUSH starts at 1; SETTINGS_MAX_CONCURRENT_STREAMS and
/// SETTINGS_MAX_HEADER_LIST_SIZE start unlimited.
inline constexpr std::uint32_t kDefaultHeaderTableSize = 4096;
inline constexpr std::uint32_t kDefaultInitialWindowSize = 65535;
/// Also the smallest SETTINGS_MAX_FRAME_SIZE there may be.
inline constexpr std::uint32_t kDefaultMaxFrameSize = 16384;
/// The largest SETTINGS_MAX_FRAME_SIZE there may be: what a frame's 24-bit length can say.
inline constexpr std::uint32_t kMaxFrameSizeLimit = (std::uint32_t{1} << 24) - 1;
/// The largest flow-control window (§6.9.1), and so the largest SETTINGS_INITIAL_WINDOW_SIZE.
inline constexpr std::uint32_t kMaxWindowSize = 0x7fffffff;
/// Stream identifiers have 31 bits (§5.1.1).
inline constexpr std::uint32_t kMaxStreamId = 0x7fffffff;

// --- errors ----------------------------------------------------------------------------------

/// Whether an error ends the connection (GOAWAY, §5.4.1) or only one stream (RST_STREAM,
/// §5.4.2).
enum class ErrorScope { connection, stream };

/// A peer's violation of RFC 9113 found in what it sent: what to tell it (the code, in GOAWAY or
/// RST_STREAM) and what to log (the message names the frame and what was wrong with it).
struct Http2Error {
  ErrorCode code = ErrorCode::protocol_error;
  ErrorScope scope = ErrorScope::connection;
  /// For a stream error, the stream to reset; 0 for a connection error.
  std::uint32_t stream_id = 0;
  std::string message;

  static Http2Error connection(ErrorCode code, std::string message) {
    return {code, ErrorScope::connection, 0, std::move(message)};
  }
  static Http2Error stream(ErrorCode code, std::uint32_t stream_id, std::string message) {
    return {code, ErrorScope::stream, stream_id, std::move(message)};
  }

  /// As the layers above take errors: Errc::decode (as HPACK's), with a message such as
  /// "HTTP/2 connection error PROTOCOL_ERROR: DATA frame on stream 0 ...".
  [[nodiscard]] Error to_error() const;
};

/// A value or an Http2Error: the framing layer's errors carry more than an Error does (the code
/// to send and the scope).
template <typename T>
using Http2Result = Result<T, Http2Error>;

/// Result of a check with no value.
using Http2Status = Http2Result<Ok>;

// --- frames on the wire ----------------------------------------------------------------------

/// A frame header (§4.1).
struct FrameHeader {
  /// The payload's length: 24 bits.
  std::uint32_t length = 0;
  FrameType type = FrameType::data;
  std::uint8_t flags = 0;
  /// 31 bits: the reserved bit before it is dropped when parsed (§4.1 says to ignore it) and
  /// sent as 0.
  std::uint32_t stream_id = 0;

  [[nodiscard]] bool has(std::uint8_t flag) const { return (flags & flag) != 0; }

  /// Parses the first 9 bytes of `bytes` (precondition: it has them). Any 9 bytes are a header:
  /// whether it is acceptable is for FrameReader (its length) and decode_frame (the rest).
  static FrameHeader parse(std::string_view bytes);
  /// Appends the 9 bytes. Preconditions: length < 2^24, stream_id < 2^31.
  void append_to(std::string& out) const;

  friend bool operator==(const FrameHeader&, const FrameHeader&) = default;
};

/// A whole frame as FrameReader hands it out: the payload is a view (see FrameReader::read for
/// how long it is valid).
struct Frame {
  FrameHeader header;
  std::string_view payload;
};

/// Cuts the bytes a server sends (after the TLS layer, from the server's first frame on) into
/// frames, however the reads split them. It checks each frame's length against the
/// SETTINGS_MAX_FRAME_SIZE we advertised, as soon as the header is in, before any payload is
/// buffered: a longer frame is a connection error FRAME_SIZE_ERROR. It holds at most one
/// incomplete frame (9 + max_frame_size() bytes), and nothing once the call after the one that
/// handed it out returned.
///
/// After an error the reader is unusable (the connection is over): every later call returns
/// that error again.
///
/// Not thread-safe: one connection's reader, used from that connection's strand.
class FrameReader {
 public:
  /// `max_frame_size`: the SETTINGS_MAX_FRAME_SIZE we advertise (precondition: 16384 to
  /// 2^24 - 1).
  explicit FrameReader(std::uint32_t max_frame_size = kDefaultMaxFrameSize);

  /// Takes bytes from the front of `input` (moving its start past them) until a frame is
  /// complete, and returns it; or std::nullopt when `input` is used up first (the bytes taken
  /// are kept for the next call). Call again with what is left of `input` until it returns
  /// std::nullopt: `input` may hold many frames.
  ///
  /// The frame's payload points into `input`'s bytes when the whole frame was there, else into
  /// the reader: either way it is valid until the next call, and while `input`'s bytes are.
  Http2Result<std::optional<Frame>> read(std::string_view& input);

  /// Changes the bound on a frame's length. To raise it, call it when we send the SETTINGS
  /// frame that does (the peer may use the new value as soon as it reads ours); to lower it,
  /// once the peer has acknowledged that frame (until then it may use the old one).
  /// Precondition: 16384 to 2^24 - 1.
  void set_max_frame_size(std::uint32_t max_frame_size);
  [[nodiscard]] std::uint32_t max_frame_size() const { return max_frame_size_; }

  /// The bytes held of a frame not complete yet (at most 9 + max_frame_size()).
  [[nodiscard]] std::size_t buffered() const;
  /// The memory the reader keeps for an incomplete frame: none to speak of between frames (an
  /// idle connection's reader holds no buffer), during one the frame's length up to 64 KiB,
  /// and up to about twice the length of a longer frame (the buffer grows as its bytes come).
  [[nodiscard]] std::size_t buffer_capacity() const { return buffer_.capacity(); }
  /// True once a call has failed; every later read() fails.
  [[nodiscard]] bool failed() const { return failure_.has_value(); }

 private:
  std::uint32_t max_frame_size_;
  std::optional<FrameHeader> header_;  // set: the current frame's header is in, its payload not
  std::string buffer_;  // the current frame's header bytes, or (once header_ is set) its payload
  bool handed_out_buffer_ = false;  // the last frame returned points into buffer_
  std::optional<Http2Error> failure_;
};

// --- decoded frames (§6) ---------------------------------------------------------------------
// Views point into the Frame's payload and are valid as long as it is.

/// DATA (§6.1), its padding stripped.
struct DataFrame {
  std::uint32_t stream_id = 0;
  bool end_stream = false;
  std::string_view data;
  /// What the frame counts against the flow-control windows: its whole payload, padding and
  /// Pad Length included (§6.1). The transport must give it back in WINDOW_UPDATE frames.
  std::uint32_t flow_controlled_size = 0;
};

/// HEADERS (§6.2), padding and priority fields stripped: the priority fields are deprecated
/// (§5.3.2) and this client ignores them.
struct HeadersFrame {
  std::uint32_t stream_id = 0;
  bool end_stream = false;
  bool end_headers = false;
  std::string_view fragment;
};

/// CONTINUATION (§6.10).
struct ContinuationFrame {
  std::uint32_t stream_id = 0;
  bool end_headers = false;
  std::string_view fragment;
};

/// RST_STREAM (§6.4).
struct RstStreamFrame {
  std::uint32_t stream_id = 0;
  ErrorCode error_code = ErrorCode::no_error;
};

/// One parameter of a SETTINGS frame.
struct Setting {
  SettingId id = SettingId::header_table_size;
  std::uint32_t value = 0;
  friend bool operator==(const Setting&, const Setting&) = default;
};

/// SETTINGS (§6.5): the known parameters, in the frame's order (the last of one id wins, §6.5.3),
/// each value within its range. Unknown ids are dropped.
struct SettingsFrame {
  bool ack = false;
  std::vector<Setting> settings;
};

/// PING's 8 bytes of opaque data (§6.7).
using PingData = std::array<std::uint8_t, 8>;

/// PING (§6.7).
struct PingFrame {
  bool ack = false;
  PingData opaque{};
};

/// GOAWAY (§6.8).
struct GoawayFrame {
  /// The highest stream id the server may have processed; those above it it did not (§6.8).
  std::uint32_t last_stream_id = 0;
  ErrorCode error_code = ErrorCode::no_error;
  /// Diagnostics, opaque: the server's, not to be trusted or shown as ours.
  std::string_view debug_data;
};

/// WINDOW_UPDATE (§6.9): an increment of 1 to 2^31 - 1 (the reserved bit dropped).
struct WindowUpdateFrame {
  std::uint32_t stream_id = 0;
  std::uint32_t increment = 0;
};

/// A frame that is valid and calls for nothing: PRIORITY (deprecated, §5.3.2) and frame types
/// this client does not know (§5.5). It still counts in the header block rule (an extension
/// frame inside a header block is an error, §5.5), which is why decode_frame returns it.
struct IgnoredFrame {
  FrameType type = FrameType::priority;
  std::uint32_t stream_id = 0;
};

/// A frame decoded by type. No PUSH_PROMISE: we disable server push, so one is always an error.
using DecodedFrame =
    std::variant<DataFrame, HeadersFrame, ContinuationFrame, RstStreamFrame, SettingsFrame,
                 PingFrame, GoawayFrame, WindowUpdateFrame, IgnoredFrame>;

/// Checks a frame against what RFC 9113 §6 requires of its type, as a client that sent
/// SETTINGS_ENABLE_PUSH 0 sees it, and decodes it. Errors (the message starts with the frame's
/// type and stream, e.g. "DATA frame on stream 0: ..."), all connection errors except where the
/// RFC says stream error:
///  - stream id: 0 for DATA, HEADERS, PRIORITY, RST_STREAM or CONTINUATION, or not 0 for
///    SETTINGS, PING or GOAWAY: PROTOCOL_ERROR;
///  - length: RST_STREAM or WINDOW_UPDATE not 4, PING not 8, GOAWAY under 8, SETTINGS not a
///    multiple of 6 or with ACK and a payload, padded or prioritised frames too short for those
///    fields: FRAME_SIZE_ERROR; PRIORITY not 5: a stream error FRAME_SIZE_ERROR;
///  - padding as long as what it pads or longer: PROTOCOL_ERROR;
///  - SETTINGS values: SETTINGS_ENABLE_PUSH other than 0 (a server may only send 0, §6.5.2) or
///    SETTINGS_MAX_FRAME_SIZE outside 16384 to 2^24 - 1: PROTOCOL_ERROR;
///    SETTINGS_INITIAL_WINDOW_SIZE above 2^31 - 1: FLOW_CONTROL_ERROR;
///  - WINDOW_UPDATE with an increment of 0: PROTOCOL_ERROR, a stream error on a stream;
///  - PUSH_PROMISE: PROTOCOL_ERROR (§8.4: we disabled push in our first SETTINGS, which the
///    server reads before any request it could push for).
/// PRIORITY and unknown types are IgnoredFrame; flags a type does not define are ignored.
Http2Result<DecodedFrame> decode_frame(const Frame& frame);

// --- the server's settings -------------------------------------------------------------------

/// The server's settings as a client tracks them: the initial values until its SETTINGS frames
/// change them. (SETTINGS_ENABLE_PUSH is not here: from a server it can only be 0.)
struct PeerSettings {
  std::uint32_t header_table_size = kDefaultHeaderTableSize;
  std::optional<std::uint32_t> max_concurrent_streams;  // none: unlimited
  std::uint32_t initial_window_size = kDefaultInitialWindowSize;
  std::uint32_t max_frame_size = kDefaultMaxFrameSize;
  std::optional<std::uint32_t> max_header_list_size;  // none: unlimited

  /// Applies a decoded (so valid) SETTINGS frame's parameters in order; an ACK changes nothing.
  /// A change of initial_window_size also changes every open stream's window (§6.9.2): the
  /// transport's to do, with the old value in hand.
  void apply(const SettingsFrame& frame);
};

// --- header blocks ---------------------------------------------------------------------------

/// A whole header block (§4.3), for HpackDecoder::decode.
struct HeaderBlock {
  std::uint32_t stream_id = 0;
  /// The HEADERS frame's END_STREAM: the block is the stream's last frame (trailers, or a
  /// response without a body).
  bool end_stream = false;
  std::string block;
};

/// Joins a HEADERS frame and the CONTINUATION frames after it into one header block, and holds
/// the rule that nothing else comes between them (§4.3, §6.10): while a block is open, any
/// frame but a CONTINUATION on its stream is a connection error PROTOCOL_ERROR, as is a
/// CONTINUATION when no block is open. Per frame read, in order:
///
///     if (auto s = assembler.check_sequence(frame.header); !s) ...  // a connection error
///     auto decoded = decode_frame(frame);                            // its errors, if any
///     auto block = assembler.on_frame(*decoded);                     // a block, when complete
///
/// check_sequence comes first so that a frame refused by decode_frame with a stream error (a
/// PRIORITY of the wrong length) inside a block is still the connection error it is there.
///
/// A block is bounded (`max_block_size`): its fragments plus 9 bytes for each frame, so that
/// neither large fragments nor endless empty CONTINUATION frames can keep us buffering. A block
/// past it is a connection error ENHANCE_YOUR_CALM: the peer went past what we can take, and a
/// block must be decoded whole to keep the HPACK tables in step (§4.3), so the connection ends.
/// So does any error here: the assembler is not meant to be used after one.
///
/// Not thread-safe: one connection's assembler, used from that connection's strand.
class HeaderBlockAssembler {
 public:
  /// By default, the header list size HpackDecoder allows (a block smaller than its list, as
  /// blocks usually are, reaches that bound first).
  static constexpr std::size_t kDefaultMaxBlockSize = HpackDecoder::kDefaultMaxHeaderListSize;

  explicit HeaderBlockAssembler(std::size_t max_block_size = kDefaultMaxBlockSize);

  /// Whether a frame with this header may come now (the rule above), whatever its payload.
  [[nodiscard]] Http2Status check_sequence(const FrameHeader& header) const;

  /// Every decoded frame, in the order read. Returns the block a HEADERS or CONTINUATION frame
  /// with END_HEADERS completes; std::nullopt for a frame that completes none (the others
  /// are the caller's to act on). Checks the sequence rule again, and the bound.
  Http2Result<std::optional<HeaderBlock>> on_frame(const DecodedFrame& frame);

  /// True between a HEADERS frame without END_HEADERS and the CONTINUATION that ends its block.
  [[nodiscard]] bool in_block() const { return open_.has_value(); }

 private:
  [[nodiscard]] Http2Status check_sequence(FrameType type, std::uint32_t stream_id) const;
  Http2Result<std::optional<HeaderBlock>> add(std::string_view fragment, bool end_headers);

  std::size_t max_block_size_;
  std::optional<HeaderBlock> open_;  // the block being joined
  std::size_t counted_ = 0;          // its fragments plus 9 per frame, as the bound counts
};

// --- writers ---------------------------------------------------------------------------------

/// What a client announces in its first SETTINGS frame. SETTINGS_ENABLE_PUSH is always 0.
struct ClientSettings {
  /// SETTINGS_INITIAL_WINDOW_SIZE: each stream's receive window (at most 2^31 - 1). The
  /// connection's window starts at 65,535 whatever this says; only a WINDOW_UPDATE on stream 0
  /// raises it.
  std::uint32_t initial_window_size = kDefaultInitialWindowSize;
  /// SETTINGS_MAX_FRAME_SIZE (16384 to 2^24 - 1): give FrameReader the same.
  std::uint32_t max_frame_size = kDefaultMaxFrameSize;
  /// SETTINGS_MAX_HEADER_LIST_SIZE: give HpackDecoder the same.
  std::uint32_t max_header_list_size = HpackDecoder::kDefaultMaxHeaderListSize;
};

/// Appends the client connection preface (§3.4): kClientPreface, then a SETTINGS frame with
/// SETTINGS_ENABLE_PUSH 0 and `settings`. Preconditions: the values within their ranges (above).
void append_client_preface(std::string& out, const ClientSettings& settings);

/// Appends a SETTINGS frame with ACK: the answer to each SETTINGS frame the server sends, once
/// its values are applied (§6.5.3).
void append_settings_ack(std::string& out);

/// Appends a PING frame; with `ack`, the answer to the server's PING, with its opaque data.
void append_ping(std::string& out, const PingData& opaque, bool ack);

/// Appends a WINDOW_UPDATE frame (stream 0: the connection's window). Preconditions: stream_id
/// < 2^31, 1 <= increment <= 2^31 - 1.
void append_window_update(std::string& out, std::uint32_t stream_id, std::uint32_t increment);

/// Appends an RST_STREAM frame. Precondition: 0 < stream_id < 2^31.
void append_rst_stream(std::string& out, std::uint32_t stream_id, ErrorCode code);

/// Appends a GOAWAY frame. `debug_data` is cut to what fits in the smallest frame size a server
/// may advertise (16384 bytes with the 8 of the fields before it): it is diagnostics, and ours
/// are short. Precondition: last_stream_id < 2^31.
void append_goaway(std::string& out, std::uint32_t last_stream_id, ErrorCode code,
                   std::string_view debug_data);

/// Appends a header block as a HEADERS frame, then as many CONTINUATION frames as needed for
/// none to be longer than `max_frame_size` (the server's SETTINGS_MAX_FRAME_SIZE); END_HEADERS
/// on the last, END_STREAM (if `end_stream`) on the HEADERS frame, where §6.2 puts it. No
/// padding, no priority. Preconditions: 0 < stream_id < 2^31, max_frame_size > 0.
void append_headers(std::string& out, std::uint32_t stream_id, std::string_view block,
                    bool end_stream, std::uint32_t max_frame_size);

/// Appends `data` as DATA frames of at most `max_frame_size` bytes (the server's
/// SETTINGS_MAX_FRAME_SIZE), without padding, END_STREAM (if `end_stream`) on the last. Empty
/// data is one empty frame if `end_stream`, else nothing. Flow control is the caller's: `data`
/// must fit in the stream's and the connection's send windows. Preconditions: 0 < stream_id <
/// 2^31, max_frame_size > 0.
void append_data(std::string& out, std::uint32_t stream_id, std::string_view data, bool end_stream,
                 std::uint32_t max_frame_size);

}  // namespace kinformer::client::detail
