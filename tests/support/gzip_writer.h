#pragma once
// gzip (RFC 1952) for tests: what kube-apiserver sends for `Accept-Encoding: gzip`, made with
// zlib's deflate, as Go's compress/gzip makes it (one member, level 1 by default).

#include <zlib.h>

#include <stdexcept>
#include <string>
#include <string_view>

namespace kinformer::testing {

inline std::string gzip(std::string_view in, int level = 1) {
  z_stream z{};
  if (deflateInit2(&z, level, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    throw std::runtime_error("deflateInit2 failed");
  }
  std::string out(deflateBound(&z, static_cast<uLong>(in.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int r = deflate(&z, Z_FINISH);
  out.resize(static_cast<std::size_t>(z.total_out));
  deflateEnd(&z);
  if (r != Z_STREAM_END) throw std::runtime_error("deflate did not finish");
  return out;
}

}  // namespace kinformer::testing
