// libFuzzer target: the streaming LIST decoders (JsonListDecoder, ProtobufListDecoder) fed one
// body in pieces cut where the fuzzer chooses.
// Input: byte 0 picks the encoding (b % 2: JSON, protobuf), the codec (b / 2 % 4: JSON Pod,
// EndpointSlice, DynamicObject (twice); protobuf Pod, Secret, Endpoints, EndpointSlice) and
// max_item_bytes (b / 8 % 4: the default, 4096, 256, 32); byte 1 (% 16) is the number of cuts,
// each two bytes (little-endian, modulo the body size + 1); the rest is the body.
// Seeds: tests/fuzz/corpus/list_decoder_fuzz/ (list bodies of both encodings, with this header).
// Checked beyond "no crash":
//  - the outcome (the items, re-encoded as JSON, resourceVersion, continue; or the error code
//    and message) does not depend on where the body was split: whole, at the fuzzer's cuts, and
//    byte by byte give the same;
//  - the documented bound: the decoder's buffer holds at most one value (an item), no longer
//    than max_item_bytes, so its capacity stays within twice that (std::string's growth) and
//    twice the body;
//  - offset() counts the bytes fed, items() the items decoded; an error is sticky (later calls
//    return it) and has a message; only Errc::decode and Errc::too_large;
//  - the result is the whole-body decoder's (RapidJSON over the body, decode_protobuf_list()),
//    except for the differences the headers document, all for bodies that fail.
// Seed protobuf-two-raws-bad-first: a finding of 2026-12-03 (two raw fields, an item of the first
// one malformed, the last one an empty list), where the check was stricter than the header.
#include <rapidjson/document.h>
#include <protozero/exception.hpp>
#include <protozero/pbf_reader.hpp>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_input.h"
#include "kinformer/client/dynamic_object.h"
#include "kinformer/client/endpoint_slice.h"
#include "kinformer/client/endpoints.h"
#include "kinformer/client/list_decoder.h"
#include "kinformer/client/pod.h"
#include "kinformer/client/protobuf.h"
#include "kinformer/client/protobuf_list_decoder.h"
#include "kinformer/client/secret.h"

namespace {

using namespace kinformer::client;

void check(bool ok) {
  if (!ok) std::abort();
}

struct Outcome {
  bool ok = false;
  Errc code = Errc::ok;
  std::string message;
  std::string resource_version;
  std::string continue_token;
  std::vector<std::string> items;  // each re-encoded as JSON by the type's codec

  bool operator==(const Outcome&) const = default;
};

Outcome outcome_of(const Result<ObjectList>& r, const Codec& json) {
  Outcome o;
  if (!r) {
    o.code = r.error().code;
    o.message = r.error().message;
    check(!o.message.empty());
    return o;
  }
  o.ok = true;
  o.resource_version = r->resource_version;
  o.continue_token = r->continue_token;
  for (const auto& item : r->items) {
    check(item != nullptr);
    o.items.push_back(json.encode(*item));
  }
  return o;
}

// Feeds `body` in the pieces `cuts` (ascending offsets) make, then finishes; checks the
// decoder's invariants on the way.
template <typename Decoder>
Outcome decode(Decoder& decoder, const Codec& json, std::string_view body,
               const std::vector<std::size_t>& cuts, std::size_t max_item_bytes) {
  // One value's bytes at most: no more than the limit, nor than the body.
  const std::size_t bound = std::max<std::size_t>(32, 2 * std::min(max_item_bytes, body.size()));
  std::size_t from = 0;
  std::size_t items = 0;
  std::optional<Error> failed;
  for (std::size_t i = 0; i <= cuts.size(); ++i) {
    const std::size_t to = i < cuts.size() ? cuts[i] : body.size();
    auto s = decoder.feed(body.substr(from, to - from));
    from = to;
    check(decoder.buffer_capacity() <= bound);
    check(decoder.items() >= items);
    items = decoder.items();
    if (!s) {
      failed = std::move(s).error();
      break;
    }
    check(decoder.offset() == from);
  }
  Result<ObjectList> r = failed ? Result<ObjectList>(*failed) : decoder.finish();
  check(decoder.buffer_capacity() <= bound);
  if (r) {
    check(r->items.size() == items);
  } else {
    check(r.error().code == Errc::decode || r.error().code == Errc::too_large);
    // Sticky: a later feed or finish reports the same error.
    auto again = decoder.feed("{");
    check(!again && again.error().code == r.error().code &&
          again.error().message == r.error().message);
    auto end = decoder.finish();
    check(!end && end.error().message == r.error().message);
  }
  return outcome_of(r, json);
}

// The first member named `name` (as FindMember finds it), or null. By index: comparing RapidJSON
// 1.1's member iterators is ambiguous in C++20 (clang's -Wambiguous-reversed-operator).
const rapidjson::Value* member(const rapidjson::Value& object, std::string_view name) {
  for (rapidjson::SizeType i = 0; i < object.MemberCount(); ++i) {
    const auto& m = *(object.MemberBegin() + i);
    if (std::string_view(m.name.GetString(), m.name.GetStringLength()) == name) return &m.value;
  }
  return nullptr;
}

// The decoder RestClient::list used before lists streamed (as tests/client/list_decoder_test.cc
// has it): RapidJSON over the whole body, then metadata and the items. Iterative, so that a
// deeply nested body does not exhaust the stack.
Outcome whole_json(const ResourceType& type, std::string body) {
  const std::string gvr = type.gvr.to_string();
  rapidjson::Document doc;
  const std::size_t size = body.size();
  rapidjson::InsituStringStream in(body.data());
  doc.ParseStream<rapidjson::kParseInsituFlag | rapidjson::kParseStopWhenDoneFlag |
                  rapidjson::kParseIterativeFlag>(in);
  Outcome o;
  o.code = Errc::decode;
  if (doc.HasParseError()) {
    o.message = "syntax";
    return o;
  }
  std::size_t end = in.Tell();
  while (end < size &&
         (body[end] == ' ' || body[end] == '\t' || body[end] == '\n' || body[end] == '\r')) {
    ++end;
  }
  if (end < size || !doc.IsObject()) {
    o.message = "syntax";
    return o;
  }
  ObjectList out;
  if (const auto* md = member(doc, "metadata"); md && md->IsObject()) {
    auto str = [&](const char* name) {
      const auto* m = member(*md, name);
      return m && m->IsString() ? std::string(m->GetString(), m->GetStringLength()) : std::string();
    };
    out.resource_version = str("resourceVersion");
    out.continue_token = str("continue");
  }
  const auto* items = member(doc, "items");
  if (items && items->IsArray()) {
    for (const auto& item : items->GetArray()) {
      auto obj = type.codec->decode(item);
      if (!obj) {
        Error e = std::move(obj).error();
        e.message = gvr + " list item " + std::to_string(out.items.size()) + ": " + e.message;
        return outcome_of(e, *type.codec);
      }
      out.items.push_back(std::move(obj).value());
    }
  } else if (items && !items->IsNull()) {
    o.message = gvr + ": list items is not an array";
    return o;
  }
  return outcome_of(out, *type.codec);
}

bool contains(const std::string& s, std::string_view part) {
  return s.find(part) != std::string::npos;
}

// How many raw fields (2) the runtime.Unknown after the magic has, as far as it parses.
std::size_t raw_fields(std::string_view body) {
  if (!body.starts_with(kProtobufMagic)) return 0;
  body.remove_prefix(kProtobufMagic.size());
  protozero::pbf_reader envelope(body.data(), body.size());
  std::size_t n = 0;
  try {
    while (envelope.next()) {
      if (envelope.tag() == 2) ++n;
      envelope.skip();
    }
  } catch (const protozero::exception&) {
  }
  return n;
}

ResourceType json_type(std::uint8_t b) {
  switch (b % 4) {
    case 0:
      return ResourceTraits<Pod>::type();
    case 1:
      return ResourceTraits<EndpointSlice>::type();
    default:
      return ResourceType{ResourceTraits<Pod>::type().gvr, dynamic_codec()};
  }
}

const ResourceType& protobuf_type(std::uint8_t b) {
  switch (b % 4) {
    case 0:
      return ResourceTraits<Pod>::type();
    case 1:
      return ResourceTraits<Secret>::type();
    case 2:
      return ResourceTraits<Endpoints>::type();
    default:
      return ResourceTraits<EndpointSlice>::type();
  }
}

constexpr std::size_t kLimits[] = {std::size_t{16} << 20, 4096, 256, 32};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  kinformer::fuzz::Input in(data, size);
  const std::uint8_t choice = in.byte();
  const bool protobuf = (choice & 1U) != 0;
  const std::size_t limit = kLimits[choice / 8 % 4];
  std::vector<std::uint16_t> raw_cuts(in.byte() % 16);
  for (auto& c : raw_cuts) c = static_cast<std::uint16_t>(in.byte() | (in.byte() << 8));
  const std::string_view body = in.rest();
  std::vector<std::size_t> cuts;
  cuts.reserve(raw_cuts.size());
  for (auto c : raw_cuts) cuts.push_back(c % (body.size() + 1));
  std::sort(cuts.begin(), cuts.end());
  std::vector<std::size_t> bytes;  // byte by byte: every split point at once
  if (body.size() <= 4096) {
    for (std::size_t i = 1; i < body.size(); ++i) bytes.push_back(i);
  }

  if (protobuf) {
    const ResourceType& type = protobuf_type(choice / 2);
    const ProtobufCodecPtr codec = protobuf_codec(type);
    auto run = [&](const std::vector<std::size_t>& at) {
      ProtobufListDecoder d(codec, ProtobufListDecoder::Options{.max_item_bytes = limit});
      return decode(d, *type.codec, body, at, limit);
    };
    const Outcome whole = run({});
    check(run(cuts) == whole);
    if (!bytes.empty()) check(run(bytes) == whole);
    const Outcome reference = outcome_of(decode_protobuf_list(*codec, body), *type.codec);
    if (whole.ok) {
      check(reference == whole);
    } else if (reference.ok) {
      // protobuf_list_decoder.h: the streaming decoder refuses a body without raw or with two
      // (the whole-body decoder returns an empty list, or the last raw), and the limit. With two,
      // the first raw is decoded as it comes, so any error in it is the streaming decoder's.
      check(whole.code == Errc::too_large || contains(whole.message, "no raw field") ||
            contains(whole.message, "more than one raw field") || raw_fields(body) > 1);
    }
  } else {
    const ResourceType type = json_type(choice / 2);
    auto run = [&](const std::vector<std::size_t>& at) {
      JsonListDecoder d(type, JsonListDecoder::Options{.max_item_bytes = limit});
      return decode(d, *type.codec, body, at, limit);
    };
    const Outcome whole = run({});
    check(run(cuts) == whole);
    if (!bytes.empty()) check(run(bytes) == whole);
    const Outcome reference = whole_json(type, std::string(body));
    const bool limited = whole.code == Errc::too_large || contains(whole.message, "nested deeper");
    if (whole.ok) {
      check(reference == whole);
    } else if (reference.ok) {
      check(limited);  // list_decoder.h: every other failure is the whole-body parse's too
    } else if (contains(reference.message, " list item ") && !limited) {
      // The whole body parsed and an item failed: the streaming decoder fails at that item.
      check(whole.code == reference.code && whole.message == reference.message);
    }
  }
  return 0;
}
