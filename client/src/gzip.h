#pragma once
// Private: decoding of `Content-Encoding: gzip` response bodies as they arrive (zlib).
//
// kube-apiserver compresses a response larger than 128 KiB when the request says
// `Accept-Encoding: gzip` (gzip level 1; watches never). A LIST of 20,000 Pods is 46 MB in
// protobuf and 1.6 MB gzipped. Why zlib and not Beast's own inflater: docs/gzip.md.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "kinformer/client/result.h"

namespace kinformer::client::detail {

/// Decompresses one gzip-encoded body (RFC 1952: one member or several in a row, each with its
/// CRC-32 and length checked), fed in pieces of any size, into pieces of at most 64 KiB.
/// Not thread-safe: one body, one thread at a time.
class GzipDecoder {
 public:
  /// `max_output`: the most decompressed bytes the body may have (Errc::too_large beyond),
  /// which bounds a small body that expands without limit. `what` names the body in errors
  /// (e.g. "GET /api/v1/pods").
  GzipDecoder(std::size_t max_output, std::string what);
  ~GzipDecoder();
  GzipDecoder(const GzipDecoder&) = delete;
  GzipDecoder& operator=(const GzipDecoder&) = delete;

  /// Decodes `in`, the next piece of the body, and hands what it decompresses to `out`, in
  /// order. An error (corrupt data, a failed checksum, bytes after the last member that do not
  /// start another, the size limit, or `out`'s own error) is returned as it is; after one, the
  /// decoder must not be fed again.
  Status feed(std::string_view in, const std::function<Status(std::string_view)>& out);

  /// The body ended: an error unless it ended where a member did (or was empty).
  [[nodiscard]] Status finish() const;

  /// Compressed bytes fed, decompressed bytes handed out.
  [[nodiscard]] std::uint64_t bytes_in() const { return in_; }
  [[nodiscard]] std::uint64_t bytes_out() const { return out_; }

 private:
  struct Stream;
  std::unique_ptr<Stream> z_;
  std::size_t max_output_;
  std::string what_;
  std::uint64_t in_ = 0;
  std::uint64_t out_ = 0;
  bool in_member_ = false;  // a member has begun and its trailer has not been read yet
};

}  // namespace kinformer::client::detail
