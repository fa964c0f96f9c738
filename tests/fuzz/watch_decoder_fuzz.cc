// libFuzzer target: the watch decoder fed one body in arbitrary pieces.
// Input: byte 0 picks the codec, byte 1 seeds the piece sizes, the rest is the body.
// Checked beyond "no crash": the events and the outcome do not depend on where the body was split
// (the same body fed whole gives the same events, error code and finish() result).
#include <cstdlib>
#include <vector>

#include "fuzz_input.h"
#include "kinformer/client/dynamic_object.h"
#include "kinformer/client/endpoint_slice.h"
#include "kinformer/client/pod.h"
#include "kinformer/client/watch_decoder.h"

namespace {

using namespace kinformer::client;

std::shared_ptr<const Codec> pick_codec(std::uint8_t b) {
  switch (b % 3) {
    case 0:
      return ResourceTraits<Pod>::type().codec;
    case 1:
      return ResourceTraits<EndpointSlice>::type().codec;
    default:
      return dynamic_codec();
  }
}

struct Outcome {
  std::size_t events = 0;
  std::vector<std::string> names;
  Errc feed = Errc::ok;
  Errc finish = Errc::ok;
};

Outcome decode(const std::shared_ptr<const Codec>& codec, std::string_view body,
               std::uint32_t seed) {
  // A small event limit, so the fuzzer reaches Errc::too_large with small inputs.
  WatchDecoder decoder(codec, WatchDecoder::Options{.max_event_bytes = 4096});
  Outcome o;
  std::vector<WatchEvent> out;
  std::size_t at = 0;
  while (at < body.size()) {
    std::size_t piece = body.size() - at;
    if (seed != 0) {
      seed = seed * 1103515245u + 12345u;
      piece = std::min<std::size_t>(piece, 1 + (seed >> 16) % 97);
    }
    auto s = decoder.feed(body.substr(at, piece), out);
    at += piece;
    if (!s.ok()) {
      o.feed = s.error().code;
      break;
    }
  }
  if (o.feed == Errc::ok) {
    auto f = decoder.finish();
    if (!f.ok()) o.finish = f.error().code;
  }
  o.events = out.size();
  for (const auto& e : out) o.names.push_back(e.object ? e.object->metadata.name : "");
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  kinformer::fuzz::Input in(data, size);
  auto codec = pick_codec(in.byte());
  std::uint32_t seed = in.byte() | 1u;
  std::string_view body = in.rest();
  Outcome whole = decode(codec, body, 0);
  Outcome split = decode(codec, body, seed);
  if (whole.events != split.events || whole.names != split.names || whole.feed != split.feed ||
      whole.finish != split.finish) {
    std::abort();  // the result depends on the chunking: a decoder bug
  }
  return 0;
}
