#pragma once
// Private: HPACK (RFC 7541), the header compression of HTTP/2, for the HTTP/2 transport. Pure
// code, no I/O: the transport hands in whole header blocks and takes out header lists.
//
// Decoding is complete (every representation, the dynamic table, Huffman-coded strings) because
// the peer chooses how to encode. Encoding is the least that is correct, for requests: literals
// that never touch the dynamic table (see hpack_encode_request).

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kinformer/client/result.h"

namespace kinformer::client::detail {

/// One header field: name and value as the peer sent them (bytes, not checked against HTTP's
/// rules for names and values: that is the transport's job, which knows pseudo-headers too).
struct HeaderField {
  std::string name;
  std::string value;
  friend bool operator==(const HeaderField&, const HeaderField&) = default;
};

/// Decodes header blocks (RFC 7541), one connection's worth: the dynamic table carries over from
/// one block to the next, so each block must be handed in, whole (HEADERS + CONTINUATION
/// payloads concatenated), in the order the peer sent them.
///
/// Errors: Errc::too_large when a block's header list passes max_header_list_size, Errc::decode
/// for everything else; the message names the problem and the offset in the block (from 0) of
/// the integer, string or field where it was found. After an error the decoder is unusable: its
/// table may no longer match the peer's, which HTTP/2 treats as a connection error
/// (COMPRESSION_ERROR); each later call says so.
///
/// Not thread-safe: one connection's decoder, used from that connection's strand.
class HpackDecoder {
 public:
  /// SETTINGS_HEADER_TABLE_SIZE's initial value (RFC 9113 §6.5.2).
  static constexpr std::uint32_t kDefaultTableSizeLimit = 4096;
  /// The default bound on one block's decoded header list (SETTINGS_MAX_HEADER_LIST_SIZE
  /// counts a field as its name, its value and 32 bytes).
  static constexpr std::size_t kDefaultMaxHeaderListSize = std::size_t{256} * 1024;

  /// `max_header_list_size`: the most a block may decode to, counted as
  /// SETTINGS_MAX_HEADER_LIST_SIZE counts (above: Errc::too_large). It bounds what a hostile
  /// peer can make the decoder allocate, whatever the block's size: a 1-byte indexed field can
  /// repeat a 4 KiB table entry. `table_size_limit`: the dynamic table's size when the
  /// connection starts and the most the peer may set it to. HTTP/2 starts every connection at
  /// 4096; another value is for a peer that agreed to it beforehand (RFC 7541's examples in
  /// Appendix C.5 start both sides at 256).
  explicit HpackDecoder(std::size_t max_header_list_size = kDefaultMaxHeaderListSize,
                        std::uint32_t table_size_limit = kDefaultTableSizeLimit);

  /// Decodes one whole header block into its header list, in order, and updates the dynamic
  /// table as the block says. An empty block is an empty list.
  Result<std::vector<HeaderField>> decode(std::string_view block);

  /// The SETTINGS_HEADER_TABLE_SIZE we sent, once the peer has acknowledged it (until then the
  /// peer may still encode for the old one). The peer may then size its table up to `limit`
  /// (a dynamic table size update above it is an error); if `limit` (or a lower one set since
  /// the last block) is below table_capacity(), the next block must start with an update to at
  /// most that (RFC 7541 §4.2), or it is an error.
  void set_table_size_limit(std::uint32_t limit);

  /// The dynamic table's entries, newest first (the entry numbered 62 in the RFC's index space
  /// comes first), and its size as RFC 7541 §4.1 counts it (name + value + 32 per entry).
  [[nodiscard]] std::vector<HeaderField> dynamic_table() const;
  [[nodiscard]] std::size_t table_size() const { return table_size_; }
  /// The table's maximum size, as the peer last set it (at most the limit).
  [[nodiscard]] std::uint32_t table_capacity() const { return capacity_; }
  /// True once a call has failed; every later decode() fails.
  [[nodiscard]] bool failed() const { return failure_.has_value(); }

 private:
  Result<std::vector<HeaderField>> decode_block(std::string_view block);
  void resize_table(std::uint32_t capacity);
  void add_to_table(HeaderField field);

  std::size_t max_header_list_size_;
  std::uint32_t limit_;            // SETTINGS_HEADER_TABLE_SIZE, acknowledged
  std::uint32_t lowest_limit_;     // the lowest limit set since the last block decoded
  std::uint32_t capacity_;         // the table's maximum size, set by the peer's updates
  std::deque<HeaderField> table_;  // newest first
  std::size_t table_size_ = 0;     // sum of name + value + 32 over table_
  std::optional<Error> failure_;   // the first error; set, the decoder is unusable
};

/// Encodes a request's header list as one header block: every field a literal that is not
/// indexed, so the block never adds to the peer's dynamic table and the encoder needs no state
/// (our requests are few and small: what indexing would save is a few bytes per request).
/// `authorization`, `proxy-authorization` and `cookie` are "never indexed", so that no
/// intermediary puts a credential in a table. Names are lower-cased (ASCII), as HTTP/2
/// requires; a name in the static table is sent as its index. Strings are sent as they are, not
/// Huffman-coded: simpler, and readable in a capture. Values are not checked (a CR, LF or NUL
/// makes a malformed request: the caller's to prevent).
///
/// `table_size_update`: starts the block with a dynamic table size update to this value. The
/// transport passes one (0 serves) on the first request after it acknowledged a peer's
/// SETTINGS_HEADER_TABLE_SIZE below our table's maximum size (4096 until then, 0 once updated):
/// RFC 7541 §4.2 requires it even of an encoder whose table is empty, and strict decoders
/// refuse the block without it.
std::string hpack_encode_request(const std::vector<HeaderField>& fields,
                                 std::optional<std::uint32_t> table_size_update = std::nullopt);

/// RFC 7541 §5.1: appends `value` as an integer with an N-bit prefix (1 <= prefix_bits <= 8)
/// whose first byte also carries `flags` (the bits above the prefix).
void hpack_encode_integer(std::string& out, std::uint8_t flags, int prefix_bits,
                          std::uint64_t value);

/// RFC 7541 §5.1: reads an integer with an N-bit prefix (1 <= prefix_bits <= 8) from `in` at
/// `pos`, ignoring the bits above the prefix, and moves `pos` past it. Errc::decode (at a byte
/// offset in `in`) if `in` ends inside it or it does not fit in 32 bits (every HPACK integer is an
/// index, a length or a table size, none of which needs more).
Result<std::uint32_t> hpack_decode_integer(std::string_view in, std::size_t& pos, int prefix_bits);

/// RFC 7541 §5.2 / Appendix B: `s` Huffman-coded, padded with ones. The request encoder does not
/// use it; tests and the fuzzer do, to make Huffman-coded input.
std::string hpack_huffman_encode(std::string_view s);

}  // namespace kinformer::client::detail
