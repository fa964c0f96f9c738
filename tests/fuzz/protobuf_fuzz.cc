// libFuzzer target: the protobuf decoders (client/src/protobuf/): object and list bodies, Status
// error bodies, and the watch stream fed in arbitrary pieces.
// Input: byte 0 picks the codec (b % 4: Pod, Secret, Endpoints, EndpointSlice) and the mode
// (b / 4 % 4: object body, list body, watch stream, error body); byte 1 seeds the watch piece
// sizes; the rest is the body. Seeds: tests/fuzz/corpus/protobuf_fuzz/, written by
// tests/client/protobuf_corpus_test.cc.
// Checked beyond "no crash": every error has the documented code and a message; every decoded
// object exists; the watch decoder's events, error and finish() result do not depend on where
// the body was split.
#include <cstdlib>
#include <string>
#include <vector>

#include "fuzz_input.h"
#include "kinformer/client/endpoint_slice.h"
#include "kinformer/client/endpoints.h"
#include "kinformer/client/pod.h"
#include "kinformer/client/protobuf.h"
#include "kinformer/client/protobuf_watch_decoder.h"
#include "kinformer/client/secret.h"

namespace {

using namespace kinformer::client;

ProtobufCodecPtr pick_codec(std::uint8_t b) {
  switch (b % 4) {
    case 0:
      return protobuf_codec(ResourceTraits<Pod>::type());
    case 1:
      return protobuf_codec(ResourceTraits<Secret>::type());
    case 2:
      return protobuf_codec(ResourceTraits<Endpoints>::type());
    default:
      return protobuf_codec(ResourceTraits<EndpointSlice>::type());
  }
}

void check_error(const Error& e, Errc expected_code) {
  if (e.code != expected_code || e.message.empty()) std::abort();
}

struct Outcome {
  std::vector<std::string> events;  // "type key rv"
  Errc feed = Errc::ok;
  Errc finish = Errc::ok;
  std::string message;
};

Outcome decode_watch(const ProtobufCodecPtr& codec, std::string_view body, std::uint32_t seed) {
  // A small frame limit, so the fuzzer reaches Errc::too_large with small inputs.
  ProtobufWatchDecoder decoder(codec, ProtobufWatchDecoder::Options{.max_event_bytes = 4096});
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
      if (s.error().message.empty()) std::abort();
      o.feed = s.error().code;
      o.message = s.error().message;
      break;
    }
  }
  if (o.feed == Errc::ok) {
    auto f = decoder.finish();
    if (!f.ok()) {
      check_error(f.error(), Errc::truncated);
      o.finish = f.error().code;
    }
  }
  if (decoder.events() != out.size()) std::abort();
  for (const auto& e : out) {
    if (!e.object) std::abort();
    o.events.push_back(std::to_string(static_cast<int>(e.type)) + " " + e.object->key() + " " +
                       e.object->metadata.resource_version);
  }
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  kinformer::fuzz::Input in(data, size);
  std::uint8_t choice = in.byte();
  auto codec = pick_codec(choice);
  std::uint32_t seed = in.byte() | 1u;
  std::string_view body = in.rest();
  switch (choice / 4 % 4) {
    case 0: {
      auto r = decode_protobuf_object(*codec, body);
      if (!r.ok()) {
        check_error(r.error(), Errc::decode);
      } else if (!r.value()) {
        std::abort();
      }
      break;
    }
    case 1: {
      auto r = decode_protobuf_list(*codec, body);
      if (!r.ok()) {
        check_error(r.error(), Errc::decode);
        break;
      }
      for (const auto& item : r->items) {
        if (!item) std::abort();
      }
      break;
    }
    case 2: {
      Outcome whole = decode_watch(codec, body, 0);
      Outcome split = decode_watch(codec, body, seed);
      if (whole.events != split.events || whole.feed != split.feed ||
          whole.finish != split.finish || whole.message != split.message) {
        std::abort();  // the result depends on the chunking: a decoder bug
      }
      break;
    }
    default: {
      Error e = error_from_protobuf_response(400 + seed % 200, body, "5");
      check_error(e, Errc::api);
      if (e.http_status != static_cast<int>(400 + seed % 200)) std::abort();
      Error status;
      auto s = decode_protobuf_status(body, status);
      if (!s.ok()) check_error(s.error(), Errc::decode);
      if (s.ok() &&
          (status.code != Errc::api || status.http_status <= 0 || status.causes.size() > 16))
        std::abort();
      break;
    }
  }
  return 0;
}
