// libFuzzer target: the gzip body decoder (client/src/gzip.h) fed one body in pieces cut where
// the fuzzer chooses.
// Input: byte 0 picks max_output (b % 4: 1 MiB, 64 KiB, 100, 0); byte 1 (% 16) is the number of
// cuts, each two bytes (little-endian, modulo the body size + 1); the rest is the body.
// Seeds: tests/fuzz/corpus/gzip_fuzz/ (gzip bodies of list responses, with this header).
// Checked beyond "no crash":
//  - the outcome (the decoded bytes, or the error code and message) does not depend on where
//    the body was split: whole, at the fuzzer's cuts, and byte by byte give the same. Except,
//    after an error: how much was handed out before it, and the "(at compressed byte N)" of a
//    data error (zlib reads ahead by as much as the piece allows before it finds one);
//  - no more than max_output bytes are handed out, in pieces of 1 to 65,536 bytes; only
//    Errc::decode and Errc::too_large, each with a message naming the body;
//  - bytes_in() counts the bytes fed up to an error or the end.
#include <algorithm>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_input.h"
#include "gzip.h"

namespace {

using kinformer::client::Errc;
using kinformer::client::Ok;
using kinformer::client::Status;
using kinformer::client::detail::GzipDecoder;

void check(bool ok) {
  if (!ok) std::abort();
}

struct Outcome {
  bool ok = true;
  Errc code = Errc::ok;
  std::string message;
  std::string out;
  bool operator==(const Outcome&) const = default;
};

Outcome run(std::string_view body, const std::vector<std::size_t>& cuts, std::size_t max_output) {
  GzipDecoder d(max_output, "GET /fuzz");
  Outcome o;
  auto out = [&](std::string_view piece) -> Status {
    check(!piece.empty() && piece.size() <= 65536);
    o.out.append(piece);
    check(o.out.size() <= max_output);
    return Ok{};
  };
  std::size_t at = 0;
  std::vector<std::size_t> ends = cuts;
  ends.push_back(body.size());
  Status s = Ok{};
  for (std::size_t end : ends) {
    s = d.feed(body.substr(at, end - at), out);
    at = end;
    if (!s) break;
  }
  if (s) {
    check(d.bytes_in() == body.size());
    s = d.finish();
  }
  check(d.bytes_out() == o.out.size());
  if (!s) {
    o.ok = false;
    o.code = s.error().code;
    o.message = s.error().message;
    check(o.code == Errc::decode || o.code == Errc::too_large);
    check(o.message.find("GET /fuzz") != std::string::npos);
    o.message = o.message.substr(0, o.message.find(" (at compressed byte "));
    o.out.clear();
  }
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  kinformer::fuzz::Input in(data, size);
  static constexpr std::size_t kLimits[] = {std::size_t{1} << 20, std::size_t{64} << 10, 100, 0};
  const std::size_t max_output = kLimits[in.byte() % 4];
  const int n_cuts = in.byte() % 16;
  std::vector<std::size_t> raw;
  for (int i = 0; i < n_cuts; ++i) raw.push_back(in.byte() | (std::size_t{in.byte()} << 8));
  const std::string_view body = in.rest();
  std::vector<std::size_t> cuts;
  for (std::size_t c : raw) cuts.push_back(c % (body.size() + 1));
  std::sort(cuts.begin(), cuts.end());

  const Outcome whole = run(body, {}, max_output);
  check(run(body, cuts, max_output) == whole);
  if (body.size() <= 4096) {
    std::vector<std::size_t> every;
    for (std::size_t i = 1; i < body.size(); ++i) every.push_back(i);
    check(run(body, every, max_output) == whole);
  }
  return 0;
}
