// Watches over HTTP/2 (client/src/http2/session.h), through RestClient against the scripted
// HTTP/2 server: streams sharing a connection, flow control by the reader's pace, resets, GOAWAY,
// the server's stream limit, PING, and the HTTP/1.1 fallback with a server that offers no h2.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "fake_apiserver.h"
#include "h2_server.h"
#include "kinformer/client/rest_client.h"
#include "test_resources.h"

namespace kinformer::client {
namespace {

using namespace std::chrono_literals;
using detail::ErrorCode;
using detail::FrameType;
using testing::H2Reply;
using testing::H2Request;
using testing::H2Stream;
using testing::H2TestServer;
using testing::H2TestServerOptions;
using testing::watch_event_line;

constexpr auto kWait = 10s;  // a guard against a hang; every wait returns once its condition holds

// A watch's next event, which must be an ADDED Pod: its name.
std::string h2_next_pod(WatchStream& w) {
  auto e = w.next();
  if (!e) return "error: " + e.error().to_string();
  if (!e->has_value()) return "end";
  return (*e)->object ? std::string((*e)->object->metadata.name) : "no object";
}

std::string h2_pod_event(const std::string& name) {
  return watch_event_line("ADDED", minimal_pod_json(name, "1"));
}

// Streams handed out by the server, one per watch request, in order.
struct H2Streams {
  std::mutex mu;
  std::vector<std::shared_ptr<H2Stream>> all;
  std::shared_ptr<H2Stream> operator[](std::size_t i) {
    std::lock_guard lock(mu);
    return i < all.size() ? all[i] : nullptr;
  }
};

class Http2Transport : public ::testing::Test {
 protected:
  explicit Http2Transport(H2TestServerOptions options = {}) : server_(std::move(options)) {
    server_.on("GET", "/api/v1/pods", [this](const H2Request&) {
      auto s = std::make_shared<H2Stream>();
      std::lock_guard lock(streams_.mu);
      streams_.all.push_back(s);
      return H2Reply::streaming(s);
    });
  }
  ~Http2Transport() override { EXPECT_TRUE(server_.errors().empty()) << server_.errors()[0]; }

  WatchStreamPtr open(RestClient& client) {
    auto w = client.watch(kPods, "", {});
    EXPECT_TRUE(w) << w.error().to_string();
    return w ? std::move(*w) : nullptr;
  }

  H2TestServer server_;
  H2Streams streams_;
};

TEST_F(Http2Transport, WatchesAreStreamsOfOneConnection) {
  RestClient client(server_.cluster_config(), unlimited());
  std::vector<WatchStreamPtr> watches;
  for (int i = 0; i < 3; ++i) watches.push_back(open(client));
  ASSERT_TRUE(server_.wait_requests(3, kWait));
  EXPECT_EQ(server_.connections(), 1u);
  const auto requests = server_.requests();
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(requests[i].connection, 1u);
    EXPECT_EQ(requests[i].stream_id, 1 + 2 * i);
    streams_[i]->send(h2_pod_event("pod-" + std::to_string(i)));
  }
  // Each watch gets its own stream's events.
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(h2_next_pod(*watches[i]), "pod-" + std::to_string(i));
  }
  EXPECT_EQ(server_.open_streams(1), 3u);
}

TEST_F(Http2Transport, TheRequestIsSentAsHttp2HeaderFields) {
  Credentials credentials;
  credentials.token = "secret-token";
  auto config = server_.cluster_config(static_credentials(credentials));
  RestClient client(config, unlimited());
  auto w = open(client);
  ASSERT_TRUE(server_.wait_requests(1, kWait));
  const H2Request r = server_.requests()[0];
  EXPECT_EQ(r.method, "GET");
  EXPECT_EQ(r.scheme, "https");
  EXPECT_EQ(r.authority, "127.0.0.1:" + std::to_string(server_.port()));
  EXPECT_TRUE(r.path.starts_with("/api/v1/pods?")) << r.path;
  EXPECT_NE(r.path.find("watch=1"), std::string::npos) << r.path;
  EXPECT_EQ(r.header("authorization"), "Bearer secret-token");
  EXPECT_FALSE(r.header("user-agent").empty());
  for (const auto& [name, value] : r.headers) {
    EXPECT_NE(name, "host");
    EXPECT_NE(name, "connection");
  }
  // The client's SETTINGS: no push, and its stream window.
  EXPECT_EQ(server_.client_setting(1, detail::SettingId::enable_push), 0u);
  EXPECT_EQ(server_.client_setting(1, detail::SettingId::initial_window_size), 1u << 20);
}

TEST_F(Http2Transport, AnErrorResponseIsItsApiError) {
  server_.on("GET", "/api/v1/pods", [](const H2Request&) {
    return H2Reply::api_status(410, "Expired", "too old resource version: 1 (5)");
  });
  RestClient client(server_.cluster_config(), unlimited());
  auto w = client.watch(kPods, "", {});
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error().code, Errc::api);
  EXPECT_EQ(w.error().http_status, 410);
  EXPECT_TRUE(w.error().is_expired()) << w.error().to_string();
}

TEST_F(Http2Transport, TheServerEndingTheStreamEndsTheWatchAndTheConnectionStays) {
  RestClient client(server_.cluster_config(), unlimited());
  auto w = open(client);
  ASSERT_TRUE(server_.wait_requests(1, kWait));
  streams_[0]->send(h2_pod_event("a"));
  streams_[0]->end();
  EXPECT_EQ(h2_next_pod(*w), "a");
  EXPECT_EQ(h2_next_pod(*w), "end");
  auto again = open(client);
  ASSERT_TRUE(server_.wait_requests(2, kWait));
  EXPECT_EQ(server_.requests()[1].connection, 1u);
  EXPECT_EQ(server_.connections(), 1u);
}

// A 200 whose stream ends at once (HEADERS with END_STREAM): an open watch that ended, not a
// failed open. The second watch's open goes through the client's strand after whatever the
// first's left queued there, so the first is read once all of it has run.
TEST_F(Http2Transport, AWatchThatEndsWithItsHeadIsOpenAndEnded) {
  server_.on("GET", "/api/v1/pods", [](const H2Request&) { return H2Reply::json(""); });
  RestClient client(server_.cluster_config(), unlimited());
  for (int i = 0; i < 5; ++i) {
    auto first = client.watch(kPods, "", {});
    ASSERT_TRUE(first) << first.error().to_string();
    auto second = client.watch(kPods, "", {});
    ASSERT_TRUE(second) << second.error().to_string();
    EXPECT_EQ(h2_next_pod(**first), "end");
    EXPECT_EQ(h2_next_pod(**first), "end");
  }
}

TEST_F(Http2Transport, AnEventSplitAcrossDataFramesArrivesWhole) {
  RestClient client(server_.cluster_config(), unlimited());
  auto w = open(client);
  ASSERT_TRUE(server_.wait_requests(1, kWait));
  const std::string line = h2_pod_event("split");
  streams_[0]->send(line.substr(0, 10));
  ASSERT_TRUE(streams_[0]->wait_sent(10, kWait));
  streams_[0]->send(line.substr(10));
  EXPECT_EQ(h2_next_pod(*w), "split");
}

// A reader far behind stops its own stream: its window is not given back, so the server holds
// the rest; another watch on the connection goes on. Once the reader catches up, the window is
// given back and every event arrives, in order.
TEST_F(Http2Transport, AReaderFarBehindHoldsItsStreamsWindowAndNoOtherStream) {
  RestClientOptions options = unlimited();
  options.watch_queue_limit = 8;
  RestClient client(server_.cluster_config(), options);
  auto slow = open(client);
  auto other = open(client);
  ASSERT_TRUE(server_.wait_requests(2, kWait));
  // Past one stream window (1 MiB): 400 events of about 4 KiB.
  const std::string padding(4000, 'x');
  constexpr int kEvents = 400;
  std::size_t total = 0;
  for (int i = 0; i < kEvents; ++i) {
    std::string line = watch_event_line(
        "ADDED", R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p)" + std::to_string(i) +
                     R"(","namespace":"ns","resourceVersion":"1","labels":{"pad":")" + padding +
                     R"("}}})");
    total += line.size();
    streams_[0]->send(std::move(line));
  }
  ASSERT_TRUE(streams_[0]->wait_blocked(kWait)) << "the server waits for window";
  EXPECT_LT(streams_[0]->bytes_sent(), total);
  const auto updates_while_held = streams_[0]->window_updates();
  // The other stream is not held up.
  streams_[1]->send(h2_pod_event("other"));
  EXPECT_EQ(h2_next_pod(*other), "other");
  EXPECT_EQ(streams_[0]->window_updates(), updates_while_held) << "no window while held";
  for (int i = 0; i < kEvents; ++i) {
    ASSERT_EQ(h2_next_pod(*slow), "p" + std::to_string(i));
  }
  EXPECT_EQ(streams_[0]->bytes_sent(), total);
  EXPECT_GT(streams_[0]->window_updates(), updates_while_held);
}

TEST_F(Http2Transport, ACancelledWatchResetsItsStreamOnly) {
  RestClient client(server_.cluster_config(), unlimited());
  auto a = open(client);
  auto b = open(client);
  ASSERT_TRUE(server_.wait_requests(2, kWait));
  a->cancel();
  ASSERT_TRUE(streams_[0]->wait_client_reset(kWait));
  EXPECT_EQ(streams_[0]->client_reset(), ErrorCode::cancel);
  streams_[1]->send(h2_pod_event("b"));
  EXPECT_EQ(h2_next_pod(*b), "b");
  EXPECT_EQ(server_.connections(), 1u);
  EXPECT_FALSE(streams_[1]->client_reset().has_value());
}

TEST_F(Http2Transport, AStreamTheServerResetsFailsItsWatch) {
  RestClient client(server_.cluster_config(), unlimited());
  auto w = open(client);
  ASSERT_TRUE(server_.wait_requests(1, kWait));
  streams_[0]->send(h2_pod_event("a"));
  EXPECT_EQ(h2_next_pod(*w), "a");
  streams_[0]->reset(ErrorCode::internal_error);
  auto e = w->next();
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().code, Errc::truncated);
  EXPECT_NE(e.error().message.find("INTERNAL_ERROR"), std::string::npos) << e.error().message;
}

// A stream the server refused (not processed), or reset before any answer (as a shared
// connection the server has just closed may be): a watch is a GET, sent once more; a second
// failure is the watch's.
TEST_F(Http2Transport, AStreamRefusedOrResetBeforeItsResponseIsSentOnceMore) {
  for (const ErrorCode code : {ErrorCode::refused_stream, ErrorCode::internal_error}) {
    SCOPED_TRACE(detail::error_code_name(code));
    std::atomic<int> calls{0};  // the server's thread counts, the test reads
    std::atomic<bool> fail_all{false};
    server_.on("GET", "/api/v1/pods", [&](const H2Request&) {
      if (++calls == 1 || fail_all) return H2Reply::reset_stream(code);
      auto s = std::make_shared<H2Stream>();
      s->send(h2_pod_event("second-try"));
      return H2Reply::streaming(s);
    });
    RestClient client(server_.cluster_config(), unlimited());
    auto w = open(client);
    ASSERT_TRUE(w);
    EXPECT_EQ(h2_next_pod(*w), "second-try");
    EXPECT_EQ(calls, 2);
    fail_all = true;
    auto failed = client.watch(kPods, "", {});
    ASSERT_FALSE(failed);
    EXPECT_NE(failed.error().message.find(detail::error_code_name(code)), std::string::npos)
        << failed.error().message;
    EXPECT_EQ(calls, 4);
  }
}

TEST_F(Http2Transport, ALostConnectionFailsEveryWatchOnItAndTheNextGoesOnANewOne) {
  RestClient client(server_.cluster_config(), unlimited());
  auto a = open(client);
  auto b = open(client);
  ASSERT_TRUE(server_.wait_requests(2, kWait));
  server_.close(1);
  for (auto* w : {a.get(), b.get()}) {
    auto e = w->next();
    ASSERT_FALSE(e);
    EXPECT_EQ(e.error().code, Errc::truncated) << e.error().to_string();
  }
  auto c = open(client);
  ASSERT_TRUE(server_.wait_requests(3, kWait));
  EXPECT_EQ(server_.requests()[2].connection, 2u);
}

// GOAWAY: the streams the server kept go on; new watches go on a new connection; the old one
// closes once its last stream is over.
TEST_F(Http2Transport, AfterGoawayOpenStreamsFinishAndNewWatchesTakeANewConnection) {
  RestClient client(server_.cluster_config(), unlimited());
  auto a = open(client);
  ASSERT_TRUE(server_.wait_requests(1, kWait));
  server_.goaway(1, 1, ErrorCode::no_error);
  // The client has read the GOAWAY once it answers a PING sent after it.
  server_.ping(1);
  ASSERT_TRUE(server_.wait_until([&] { return server_.ping_acks(1) == 1; }, kWait));
  auto b = open(client);
  ASSERT_TRUE(server_.wait_requests(2, kWait));
  EXPECT_EQ(server_.requests()[1].connection, 2u);
  streams_[0]->send(h2_pod_event("still-served"));
  EXPECT_EQ(h2_next_pod(*a), "still-served");
  streams_[0]->end();
  EXPECT_EQ(h2_next_pod(*a), "end");
  EXPECT_TRUE(server_.wait_connection_closed(1, kWait));
  EXPECT_EQ(server_.refused_streams(), 0u);
}

class Http2TransportTwoStreams : public Http2Transport {
 protected:
  Http2TransportTwoStreams() : Http2Transport(two_streams()) {}
  static H2TestServerOptions two_streams() {
    H2TestServerOptions o;
    o.max_concurrent_streams = 2;
    return o;
  }
};

TEST_F(Http2TransportTwoStreams, WatchesPastTheServersStreamLimitGoOnASecondConnection) {
  RestClient client(server_.cluster_config(), unlimited());
  std::vector<WatchStreamPtr> watches;
  for (int i = 0; i < 5; ++i) watches.push_back(open(client));
  ASSERT_TRUE(server_.wait_requests(5, kWait));
  EXPECT_EQ(server_.connections(), 3u);
  EXPECT_EQ(server_.refused_streams(), 0u);
  for (std::size_t i = 0; i < 5; ++i) streams_[i]->send(h2_pod_event("p" + std::to_string(i)));
  for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(h2_next_pod(*watches[i]), "p" + std::to_string(i));
}

// A server that takes no stream at all: the watch fails after one connection, not a connection
// per attempt until the deadline.
TEST(Http2NoStreams, AServerThatTakesNoStreamFailsTheWatchAfterOneConnection) {
  H2TestServerOptions o;
  o.max_concurrent_streams = 0;
  H2TestServer server(o);
  server.on("GET", "/api/v1/pods", [](const H2Request&) { return H2Reply::json("{}"); });
  RestClient client(server.cluster_config(), unlimited());
  auto w = client.watch(kPods, "", {});
  ASSERT_FALSE(w);
  EXPECT_NE(w.error().message.find("takes no stream"), std::string::npos) << w.error().message;
  EXPECT_EQ(server.connections(), 1u);
  EXPECT_EQ(server.requests().size(), 0u);
}

TEST_F(Http2Transport, TheServersPingIsAnswered) {
  RestClient client(server_.cluster_config(), unlimited());
  auto w = open(client);
  ASSERT_TRUE(server_.wait_requests(1, kWait));
  server_.ping(1);
  EXPECT_TRUE(server_.wait_until([&] { return server_.ping_acks(1) == 1; }, kWait));
}

// A connection silent past http2_read_idle_timeout is pinged; with no answer within
// http2_ping_timeout it is given up: its watches fail, and the next one connects anew.
TEST_F(Http2Transport, ASilentConnectionIsPingedAndGivenUpWhenTheAnswerDoesNotCome) {
  RestClientOptions options = unlimited();
  options.http2_read_idle_timeout = 100ms;
  options.http2_ping_timeout = 200ms;
  options.watch_idle_timeout = 5s;  // the bound should the PING not end it
  RestClient client(server_.cluster_config(), options);
  auto w = open(client);
  ASSERT_TRUE(server_.wait_requests(1, kWait));
  // Answered, the PINGs keep the connection.
  ASSERT_TRUE(server_.wait_client_pings(1, 3, kWait));
  EXPECT_TRUE(server_.connection_open(1));
  streams_[0]->send(h2_pod_event("alive"));
  EXPECT_EQ(h2_next_pod(*w), "alive");
  server_.set_answer_pings(false);
  auto e = w->next();
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().code, Errc::timeout) << e.error().to_string();
  EXPECT_NE(e.error().message.find("PING"), std::string::npos) << e.error().message;
  auto again = open(client);
  ASSERT_TRUE(server_.wait_requests(2, kWait));
  EXPECT_EQ(server_.requests()[1].connection, 2u);
}

// A watch whose stream stays silent past its idle deadline fails, and the connection is
// checked with a PING at once (not after http2_read_idle_timeout): a watch opened meanwhile
// goes on a new connection.
TEST_F(Http2Transport, AWatchIdlePastItsDeadlineFailsAndItsConnectionIsChecked) {
  RestClientOptions options = unlimited();
  options.watch_idle_timeout = 200ms;
  RestClient client(server_.cluster_config(), options);
  server_.set_answer_pings(false);
  auto w = open(client);
  ASSERT_TRUE(server_.wait_requests(1, kWait));
  auto e = w->next();
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().code, Errc::timeout) << e.error().to_string();
  ASSERT_TRUE(streams_[0]->wait_client_reset(kWait));
  EXPECT_TRUE(server_.wait_client_pings(1, 1, kWait));
  auto again = open(client);
  ASSERT_TRUE(server_.wait_requests(2, kWait));
  EXPECT_EQ(server_.requests()[1].connection, 2u);
}

TEST(Http2Fallback, AServerWithoutH2GetsAConnectionPerWatchOverHttp11) {
  testing::FakeApiServerOptions o;
  o.tls = true;
  testing::FakeApiServer server(std::move(o));
  std::vector<std::shared_ptr<testing::ScriptedStream>> streams;
  std::mutex mu;
  server.on("GET", "/api/v1/pods", [&](const testing::Request&) {
    auto s = std::make_shared<testing::ScriptedStream>();
    s->send(h2_pod_event("over-http11"));
    std::lock_guard lock(mu);
    streams.push_back(s);
    return testing::Reply::streaming(s);
  });
  RestClient client(server.cluster_config(), unlimited());
  auto a = client.watch(kPods, "", {});
  auto b = client.watch(kPods, "", {});
  ASSERT_TRUE(a && b);
  EXPECT_EQ(h2_next_pod(**a), "over-http11");
  EXPECT_EQ(h2_next_pod(**b), "over-http11");
  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_NE(requests[0].connection, requests[1].connection);
}

// http2 = false: the client does not offer h2, and a server that speaks nothing else (as the
// scripted one) cannot serve it.
TEST(Http2Disabled, NoConnectionOffersH2) {
  H2TestServer server;
  server.on("GET", "/api/v1/pods", [](const H2Request&) { return H2Reply::json("{}"); });
  RestClientOptions options = unlimited();
  options.http2 = false;
  RestClient client(server.cluster_config(), options);
  auto w = client.watch(kPods, "", {});
  EXPECT_FALSE(w);
  EXPECT_EQ(server.connections(), 0u);
  EXPECT_EQ(server.requests().size(), 0u);
}

}  // namespace
}  // namespace kinformer::client
