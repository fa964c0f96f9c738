#include "gzip.h"

#include <zlib.h>

#include <algorithm>
#include <new>
#include <utility>

namespace kinformer::client::detail {
namespace {

constexpr std::size_t kOutputPiece = std::size_t{64} * 1024;
// zlib counts in uInt (32 bits): a larger piece is fed in slices.
constexpr std::size_t kMaxSlice = std::size_t{1} << 30;
// 16 + 15: a gzip header and trailer around a deflate stream with a window of up to 32 KiB.
constexpr int kGzipWindowBits = 16 + MAX_WBITS;

}  // namespace

struct GzipDecoder::Stream {
  Stream() : piece(new char[kOutputPiece]) {
    if (inflateInit2(&z, kGzipWindowBits) != Z_OK) throw std::bad_alloc();
  }
  ~Stream() { inflateEnd(&z); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  z_stream z{};
  std::unique_ptr<char[]> piece;
};

GzipDecoder::GzipDecoder(std::size_t max_output, std::string what)
    : z_(std::make_unique<Stream>()), max_output_(max_output), what_(std::move(what)) {}

GzipDecoder::~GzipDecoder() = default;

Status GzipDecoder::feed(std::string_view in, const std::function<Status(std::string_view)>& out) {
  z_stream& z = z_->z;
  while (!in.empty()) {
    const std::size_t slice = std::min(in.size(), kMaxSlice);
    // zlib's API is not const-correct: it never writes through next_in.
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-const-cast)
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    z.avail_in = static_cast<uInt>(slice);
    const std::uint64_t slice_start = in_;
    in.remove_prefix(slice);
    in_ += slice;
    for (;;) {
      if (!in_member_) {
        if (z.avail_in == 0) break;
        // The next member (RFC 1952 allows several in a row; Go's reader reads them all).
        if (inflateReset(&z) != Z_OK) {
          return Error::make(Errc::decode, what_ + ": gzip-encoded body: inflateReset failed");
        }
        in_member_ = true;
      }
      const uInt avail_before = z.avail_in;
      z.next_out = reinterpret_cast<Bytef*>(z_->piece.get());
      z.avail_out = static_cast<uInt>(kOutputPiece);
      const int r = inflate(&z, Z_NO_FLUSH);
      const std::size_t n = kOutputPiece - z.avail_out;
      if (n > 0) {
        if (n > max_output_ - std::min<std::uint64_t>(out_, max_output_)) {
          return Error::make(Errc::too_large,
                             what_ + ": gzip-encoded body decompresses to more than " +
                                 std::to_string(max_output_) + " bytes (max_response_bytes)");
        }
        out_ += n;
        if (auto s = out(std::string_view(z_->piece.get(), n)); !s) return s;
      }
      if (r == Z_STREAM_END) {
        in_member_ = false;  // header, data, CRC-32 and length all read and checked
        continue;
      }
      // Z_BUF_ERROR: no progress was possible, which is fine once the input is used up.
      const bool progress = n > 0 || z.avail_in != avail_before;
      if (r == Z_OK || r == Z_BUF_ERROR) {
        if (z.avail_out == 0) continue;  // the piece is full: more output may be pending
        if (z.avail_in == 0) break;      // this piece of the body is used up
        if (progress) continue;
      }
      const std::uint64_t at = slice_start + (slice - z.avail_in);
      std::string reason = z.msg != nullptr ? z.msg : "inflate returned " + std::to_string(r);
      if (r == Z_NEED_DICT) reason = "asks for a preset dictionary";
      if (r == Z_MEM_ERROR) reason = "out of memory";
      return Error::make(Errc::decode, what_ + ": gzip-encoded body: " + reason +
                                           " (at compressed byte " + std::to_string(at) + ")");
    }
  }
  return Ok{};
}

Status GzipDecoder::finish() const {
  if (!in_member_) return Ok{};
  return Error::make(Errc::decode, what_ + ": gzip-encoded body ends before its gzip trailer (" +
                                       std::to_string(in_) + " compressed bytes, " +
                                       std::to_string(out_) + " decompressed): truncated");
}

}  // namespace kinformer::client::detail
