// The seed corpus of tests/fuzz/protobuf_fuzz.cc, written from readable builders instead of
// hand-edited binaries. The test checks that tests/fuzz/corpus/protobuf_fuzz/ holds exactly
// these seeds; to (re)write them after changing a seed:
//   KINFORMER_WRITE_FUZZ_CORPUS=1 build/tests/client/kinformer_client_test
//   --gtest_filter='ProtobufFuzzCorpus.*'
// Input layout (see protobuf_fuzz.cc): byte 0 = codec (b % 4) + 4 * mode (object, list, watch,
// error body), byte 1 = the seed of the watch piece sizes, then the body.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include "protobuf_samples.h"

namespace kinformer::client {
namespace {

using testing::envelope;
using testing::Msg;
using testing::watch_frame;

enum Codec : char { kPod = 0, kSecret = 1, kEndpoints = 2, kSlice = 3 };
enum Mode : char { kObject = 0, kList = 1, kWatch = 2, kErrorBody = 3 };

std::string seed(Codec codec, Mode mode, std::string_view body) {
  std::string s;
  s.push_back(static_cast<char>(codec + 4 * mode));
  s.push_back('\x2b');
  return s.append(body);
}

Msg slice() {
  return Msg()
      .msg(1, Msg()
                  .str(1, "web-abc")
                  .str(3, "ns")
                  .str(6, "9")
                  .entry(11, "kubernetes.io/service-name", "web"))
      .msg(2, Msg()
                  .str(1, "10.0.0.1")
                  .msg(2, Msg().boolean(1, true).boolean(3, false))
                  .str(6, "n1")
                  .msg(4, Msg().str(1, "Pod").str(3, "web-1")))
      .msg(3, Msg().str(1, "http").str(2, "TCP").int32(3, 8080))
      .str(4, "IPv4");
}

Msg expired_410() {
  return Msg().str(3, "too old resource version: 1 (5)").str(4, "Expired").int32(6, 410);
}

std::map<std::string, std::string> seeds() {
  std::map<std::string, std::string> s;
  s["pod-object"] = seed(kPod, kObject, envelope("v1", "Pod", testing::pod_proto("web-1", "42")));
  s["secret-object"] = seed(kSecret, kObject,
                            envelope("v1", "Secret",
                                     Msg()
                                         .msg(1, Msg().str(1, "tls").str(3, "ns"))
                                         .entry(2, "tls.key", "key")
                                         .str(3, "kubernetes.io/tls")));
  s["endpoints-object"] =
      seed(kEndpoints, kObject,
           envelope("v1", "Endpoints",
                    Msg()
                        .msg(1, Msg().str(1, "web").str(3, "ns"))
                        .msg(2, Msg()
                                    .msg(1, Msg().str(1, "10.0.0.1").msg(2, Msg().str(1, "Pod")))
                                    .msg(3, Msg().int32(2, 80)))));
  s["slice-object"] =
      seed(kSlice, kObject, envelope("discovery.k8s.io/v1", "EndpointSlice", slice()));
  s["pod-list"] = seed(kPod, kList,
                       envelope("v1", "PodList",
                                Msg()
                                    .msg(1, Msg().str(2, "100").str(3, "next"))
                                    .msg(2, testing::pod_proto("a", "1"))
                                    .msg(2, testing::pod_proto("b", "2"))));
  s["pod-watch"] =
      seed(kPod, kWatch,
           watch_frame("ADDED", envelope("v1", "Pod", testing::pod_proto("a", "1"))) +
               watch_frame("BOOKMARK",
                           envelope("v1", "Pod",
                                    Msg().msg(1, Msg().str(6, "2").entry(
                                                     12, "k8s.io/initial-events-end", "true")))) +
               watch_frame("ERROR", envelope("v1", "Status", expired_410())));
  std::string slice_watch =
      watch_frame("MODIFIED", envelope("discovery.k8s.io/v1", "EndpointSlice", slice())) +
      watch_frame("DELETED", envelope("discovery.k8s.io/v1", "EndpointSlice", slice()));
  s["slice-watch"] = seed(kSlice, kWatch, slice_watch);
  s["slice-watch-truncated"] =
      seed(kSlice, kWatch, std::string_view(slice_watch).substr(0, slice_watch.size() - 7));
  s["status-410"] = seed(kPod, kErrorBody, envelope("v1", "Status", expired_410()));
  s["status-504-causes"] =
      seed(kPod, kErrorBody,
           envelope("v1", "Status",
                    Msg()
                        .str(4, "Timeout")
                        .msg(5, Msg().msg(4, Msg().str(1, "ResourceVersionTooLarge")).int32(5, 1))
                        .int32(6, 504)));
  return s;
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(ProtobufFuzzCorpus, CheckedInSeedsAreTheGeneratedOnes) {
  const std::filesystem::path dir = KINFORMER_PROTOBUF_CORPUS_DIR;
  const auto want = seeds();
  if (std::getenv("KINFORMER_WRITE_FUZZ_CORPUS")) {
    std::filesystem::create_directories(dir);
    for (const auto& entry : std::filesystem::directory_iterator(dir))
      std::filesystem::remove(entry.path());
    for (const auto& [name, bytes] : want) std::ofstream(dir / name, std::ios::binary) << bytes;
  }
  std::map<std::string, std::string> got;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    got[entry.path().filename().string()] = read_file(entry.path());
  }
  ASSERT_EQ(got.size(), want.size())
      << "rewrite with KINFORMER_WRITE_FUZZ_CORPUS=1 (see the top of this file)";
  for (const auto& [name, bytes] : want) {
    EXPECT_TRUE(got.count(name) && got[name] == bytes)
        << name << " differs from its builder; rewrite the corpus";
  }
}

}  // namespace
}  // namespace kinformer::client
