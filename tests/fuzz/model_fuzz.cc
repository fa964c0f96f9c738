// libFuzzer target: the typed model decoders (Pod, Secret, Endpoints, EndpointSlice, dynamic).
// Input: byte 0 picks the codec, the rest is one JSON object.
// Checked beyond "no crash": what decodes encodes to valid JSON that decodes again. (Not byte
// equality: RapidJSON 1.1.0's default number parsing is not correctly rounded, so a double with
// 17+ digits can move by one unit in the last place per decode; its full-precision mode has
// undefined behaviour (clz(0)) in that version. Found by this target; see the README.)
#include <cstdlib>
#include <string>

#include <rapidjson/document.h>

#include "fuzz_input.h"
#include "kinformer/client/dynamic_object.h"
#include "kinformer/client/endpoint_slice.h"
#include "kinformer/client/endpoints.h"
#include "kinformer/client/pod.h"
#include "kinformer/client/secret.h"

namespace {

using namespace kinformer::client;

std::shared_ptr<const Codec> pick_codec(std::uint8_t b) {
  switch (b % 5) {
    case 0:
      return ResourceTraits<Pod>::type().codec;
    case 1:
      return ResourceTraits<Secret>::type().codec;
    case 2:
      return ResourceTraits<Endpoints>::type().codec;
    case 3:
      return ResourceTraits<EndpointSlice>::type().codec;
    default:
      return dynamic_codec();
  }
}

// Parses without recursion (the harness must not overflow before the decoder is reached).
bool parse(std::string_view text, rapidjson::Document& doc) {
  doc.Parse<rapidjson::kParseIterativeFlag | rapidjson::kParseStopWhenDoneFlag>(text.data(),
                                                                                text.size());
  return !doc.HasParseError();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  kinformer::fuzz::Input in(data, size);
  auto codec = pick_codec(in.byte());
  rapidjson::Document doc;
  if (!parse(in.rest(), doc)) return 0;
  auto first = codec->decode(doc);
  if (!first.ok()) {
    if (first.error().message.empty()) std::abort();
    return 0;
  }
  std::string once = codec->encode(*first.value());
  rapidjson::Document again;
  if (!parse(once, again)) std::abort();  // the encoder wrote invalid JSON
  auto second = codec->decode(again);
  if (!second.ok()) std::abort();  // what we encode we cannot decode
  if (second.value()->metadata != first.value()->metadata) std::abort();  // metadata changed
  return 0;
}
