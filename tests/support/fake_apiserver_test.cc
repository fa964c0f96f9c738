// Smoke tests of the FakeApiServer itself, with a plain synchronous Beast client.
#include "fake_apiserver.h"

#include <gtest/gtest.h>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace kinformer::testing {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using namespace std::chrono_literals;

struct RawClient {
  explicit RawClient(std::uint16_t port) : socket(ioc) {
    socket.connect({asio::ip::make_address("127.0.0.1"), port});
  }
  http::response<http::string_body> get(const std::string& target) {
    http::request<http::string_body> req{http::verb::get, target, 11};
    req.set(http::field::host, "127.0.0.1");
    req.set("X-Test", "yes");
    http::write(socket, req);
    http::response<http::string_body> res;
    http::read(socket, buffer, res);
    return res;
  }
  asio::io_context ioc;
  asio::ip::tcp::socket socket;
  beast::flat_buffer buffer;
};

TEST(FakeApiServer, AnswersRegisteredPathsAndRecordsRequests) {
  FakeApiServer server;
  server.on("GET", "/api/v1/pods", [](const Request&) { return Reply::json(R"({"items":[]})"); });
  RawClient client(server.port());
  auto res = client.get("/api/v1/pods?labelSelector=app%3Dweb&limit=5");
  EXPECT_EQ(res.result_int(), 200);
  EXPECT_EQ(res.body(), R"({"items":[]})");
  ASSERT_TRUE(server.wait_for_requests(1, 5s));
  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].path, "/api/v1/pods");
  EXPECT_EQ(reqs[0].param("labelSelector"), "app=web");
  EXPECT_EQ(reqs[0].param("limit"), "5");
  EXPECT_EQ(reqs[0].header("x-test"), "yes");
  // Keep-alive: a second request on the same connection; unknown path is a 404 Status.
  auto missing = client.get("/nope");
  EXPECT_EQ(missing.result_int(), 404);
  EXPECT_NE(missing.body().find("\"reason\":\"NotFound\""), std::string::npos);
}

TEST(FakeApiServer, StreamsScriptedChunksAndEnds) {
  FakeApiServer server;
  auto stream = std::make_shared<ScriptedStream>();
  stream->send("{\"a\":");  // queued before the request arrives
  server.on("GET", "/watch*", [stream](const Request&) { return Reply::streaming(stream); });
  RawClient client(server.port());
  http::request<http::empty_body> req{http::verb::get, "/watch/x", 11};
  http::write(client.socket, req);
  http::response_parser<http::string_body> parser;
  http::read_header(client.socket, client.buffer, parser);
  EXPECT_TRUE(parser.chunked());
  ASSERT_TRUE(stream->wait_started(5s));
  stream->send("1}\n");
  stream->end();
  http::read(client.socket, client.buffer, parser);
  EXPECT_EQ(parser.get().body(), "{\"a\":1}\n");
  EXPECT_TRUE(stream->wait_closed(5s));
  EXPECT_FALSE(stream->wait_client_closed(0ms));  // the server ended it, the client is still there
}

TEST(FakeApiServer, AbortCutsTheStream) {
  FakeApiServer server;
  auto stream = std::make_shared<ScriptedStream>();
  server.on("GET", "/w", [stream](const Request&) { return Reply::streaming(stream); });
  RawClient client(server.port());
  http::request<http::empty_body> req{http::verb::get, "/w", 11};
  http::write(client.socket, req);
  http::response_parser<http::string_body> parser;
  http::read_header(client.socket, client.buffer, parser);
  stream->send("{\"half\":");
  stream->abort();
  beast::error_code ec;
  http::read(client.socket, client.buffer, parser, ec);
  EXPECT_TRUE(ec);
  EXPECT_FALSE(parser.is_done());
  EXPECT_TRUE(stream->wait_closed(5s));
  EXPECT_TRUE(server.wait_for_open_connections(0, 5s));
}

TEST(FakeApiServer, DetectsClientHangup) {
  FakeApiServer server;
  auto stream = std::make_shared<ScriptedStream>();
  server.on("GET", "/w", [stream](const Request&) { return Reply::streaming(stream); });
  {
    RawClient client(server.port());
    http::request<http::empty_body> req{http::verb::get, "/w", 11};
    http::write(client.socket, req);
    ASSERT_TRUE(stream->wait_started(5s));
  }
  EXPECT_TRUE(stream->wait_client_closed(5s));
}

TEST(FakeApiServer, DestructorClosesStreamsButIsNoClientHangup) {
  auto server = std::make_unique<FakeApiServer>();
  auto stream = std::make_shared<ScriptedStream>();
  server->on("GET", "/w", [stream](const Request&) { return Reply::streaming(stream); });
  RawClient client(server->port());
  http::request<http::empty_body> req{http::verb::get, "/w", 11};
  http::write(client.socket, req);
  ASSERT_TRUE(stream->wait_started(5s));
  server.reset();
  EXPECT_TRUE(stream->closed());
  EXPECT_FALSE(stream->wait_client_closed(0ms));
}

TEST(Certs, MakesPemPki) {
  Pki pki = make_pki();
  EXPECT_NE(pki.ca.cert_pem.find("BEGIN CERTIFICATE"), std::string::npos);
  EXPECT_NE(pki.server.key_pem.find("PRIVATE KEY"), std::string::npos);
  EXPECT_NE(pki.client.cert_pem, pki.server.cert_pem);
}

}  // namespace
}  // namespace kinformer::testing
