// Smoke tests of the H2TestServer itself, with a minimal blocking HTTP/2 client over OpenSSL
// written here (the client's framing and HPACK code make and read the frames).
#include "h2_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <stdexcept>
#include <type_traits>

#include "http2/hpack.h"

namespace kinformer::testing {
namespace {

namespace h2 = client::detail;
using h2::ErrorCode;
using h2::FrameType;
using namespace std::chrono_literals;

constexpr auto kH2Wait = 10s;

// A frame as read, owning its payload.
struct H2TestFrame {
  h2::FrameHeader header;
  std::string payload;

  [[nodiscard]] h2::DecodedFrame decoded() const {
    auto d = h2::decode_frame({header, payload});
    if (!d) throw std::runtime_error(d.error().message);
    return *d;
  }
};

// One TLS connection speaking HTTP/2, blocking, every read bounded by a 10 s socket timeout.
class H2TestClient {
 public:
  explicit H2TestClient(const H2TestServer& server) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd_ < 0) throw std::runtime_error("socket");
    const timeval timeout{10, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(server.port());
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      throw std::runtime_error("connect");
    }
    ctx_ = SSL_CTX_new(TLS_client_method());
    BIO* bio = BIO_new_mem_buf(server.pki().ca.cert_pem.data(),
                               static_cast<int>(server.pki().ca.cert_pem.size()));
    X509* ca = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
    BIO_free(bio);
    X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx_), ca);
    X509_free(ca);
    SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
    static const unsigned char kAlpn[] = {2, 'h', '2'};
    SSL_CTX_set_alpn_protos(ctx_, kAlpn, sizeof kAlpn);
    ssl_ = SSL_new(ctx_);
    SSL_set_fd(ssl_, fd_);
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_), "127.0.0.1");
    if (SSL_connect(ssl_) != 1) throw std::runtime_error("TLS handshake failed");
    const unsigned char* alpn = nullptr;
    unsigned int alpn_len = 0;
    SSL_get0_alpn_selected(ssl_, &alpn, &alpn_len);
    if (std::string_view(reinterpret_cast<const char*>(alpn), alpn_len) != "h2") {
      throw std::runtime_error("the server did not select h2");
    }
  }
  ~H2TestClient() {
    SSL_free(ssl_);
    SSL_CTX_free(ctx_);
    ::close(fd_);
  }
  H2TestClient(const H2TestClient&) = delete;
  H2TestClient& operator=(const H2TestClient&) = delete;

  void write(const std::string& bytes) {
    if (SSL_write(ssl_, bytes.data(), static_cast<int>(bytes.size())) !=
        static_cast<int>(bytes.size())) {
      throw std::runtime_error("SSL_write failed");
    }
  }

  // The next frame; nullopt once the connection ended (or no frame came within 10 s).
  std::optional<H2TestFrame> read_frame() {
    for (;;) {
      std::string_view in = pending_;
      auto frame = reader_.read(in);
      if (!frame) throw std::runtime_error(frame.error().message);
      if (*frame) {
        H2TestFrame out{(*frame)->header, std::string((*frame)->payload)};
        pending_.erase(0, pending_.size() - in.size());
        return out;
      }
      pending_.clear();  // all taken by the reader
      char buf[16384];
      const int n = SSL_read(ssl_, buf, sizeof buf);
      if (n <= 0) return std::nullopt;
      pending_.append(buf, static_cast<std::size_t>(n));
    }
  }

  // The next frame, which must be of `type`; valid until the next call.
  const H2TestFrame& expect(FrameType type) {
    auto frame = read_frame();
    if (!frame) {
      throw std::runtime_error("the connection ended before a " + h2::frame_type_name(type) +
                               " frame");
    }
    if (frame->header.type != type) {
      throw std::runtime_error("expected a " + h2::frame_type_name(type) + " frame, got " +
                               h2::frame_type_name(frame->header.type));
    }
    last_ = std::move(*frame);
    return last_;
  }

  // The next frame, which must be a T; its views are valid until the next call.
  template <typename T>
  T expect() {
    return std::get<T>(expect(type_of<T>()).decoded());
  }

  // The preface and our SETTINGS; reads the server's SETTINGS, acknowledges them, and reads the
  // server's ACK of ours. Returns the server's settings.
  h2::SettingsFrame open() {
    std::string out;
    h2::append_client_preface(out, {});
    write(out);
    auto settings = expect<h2::SettingsFrame>();
    out.clear();
    h2::append_settings_ack(out);
    write(out);
    if (!expect<h2::SettingsFrame>().ack) {
      throw std::runtime_error("a second SETTINGS frame that is no ACK");
    }
    return settings;
  }

  void request(std::uint32_t stream_id, const std::string& method, const std::string& path,
               std::vector<h2::HeaderField> extra = {}, bool end_stream = true) {
    std::vector<h2::HeaderField> fields{
        {":method", method}, {":scheme", "https"}, {":authority", "127.0.0.1"}, {":path", path}};
    fields.insert(fields.end(), extra.begin(), extra.end());
    std::string out;
    h2::append_headers(out, stream_id, h2::hpack_encode_request(fields), end_stream,
                       h2::kDefaultMaxFrameSize);
    write(out);
  }

  void data(std::uint32_t stream_id, std::string_view bytes, bool end_stream) {
    std::string out;
    h2::append_data(out, stream_id, bytes, end_stream, h2::kDefaultMaxFrameSize);
    write(out);
  }

  void window_update(std::uint32_t stream_id, std::uint32_t increment) {
    std::string out;
    h2::append_window_update(out, stream_id, increment);
    write(out);
  }

  void ping(const h2::PingData& opaque, bool ack = false) {
    std::string out;
    h2::append_ping(out, opaque, ack);
    write(out);
  }

  // A response's header list, from its HEADERS frame (no CONTINUATION: the server's are short).
  std::vector<h2::HeaderField> fields(const H2TestFrame& headers) {
    auto block = decoder_.decode(std::get<h2::HeadersFrame>(headers.decoded()).fragment);
    if (!block) throw std::runtime_error(block.error().message);
    return *block;
  }

  // DATA frames on `stream_id` until `n` payload bytes of 'x' came: each no longer than 16384
  // bytes and none with END_STREAM. Returns the count.
  std::size_t read_data(std::uint32_t stream_id, std::size_t n) {
    std::size_t got = 0;
    while (got < n) {
      auto data = expect<h2::DataFrame>();
      EXPECT_EQ(data.stream_id, stream_id);
      EXPECT_LE(data.data.size(), h2::kDefaultMaxFrameSize);
      EXPECT_FALSE(data.end_stream);
      EXPECT_EQ(data.data.find_first_not_of('x'), std::string_view::npos);
      got += data.data.size();
    }
    return got;
  }

  // DATA frames on `stream_id` up to the one with END_STREAM: their bytes. (The server may end
  // a body with the last bytes or in an empty frame of its own, depending on when end() came.)
  std::string read_body(std::uint32_t stream_id) {
    std::string body;
    for (;;) {
      auto data = expect<h2::DataFrame>();
      EXPECT_EQ(data.stream_id, stream_id);
      body.append(data.data);
      if (data.end_stream) return body;
    }
  }

  // Sends close_notify and closes the socket.
  void close() {
    SSL_shutdown(ssl_);
    ::shutdown(fd_, SHUT_RDWR);
  }

 private:
  int fd_ = -1;
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
  std::string pending_;  // read, not taken by the reader yet
  h2::FrameReader reader_;
  h2::HpackDecoder decoder_;
  H2TestFrame last_;  // what expect() returned last

  template <typename T>
  static FrameType type_of() {
    if constexpr (std::is_same_v<T, h2::DataFrame>) return FrameType::data;
    if constexpr (std::is_same_v<T, h2::HeadersFrame>) return FrameType::headers;
    if constexpr (std::is_same_v<T, h2::RstStreamFrame>) return FrameType::rst_stream;
    if constexpr (std::is_same_v<T, h2::SettingsFrame>) return FrameType::settings;
    if constexpr (std::is_same_v<T, h2::PingFrame>) return FrameType::ping;
    if constexpr (std::is_same_v<T, h2::GoawayFrame>) return FrameType::goaway;
    if constexpr (std::is_same_v<T, h2::WindowUpdateFrame>) return FrameType::window_update;
  }
};

TEST(H2TestServer, AnswersARequestWithHeadersDataAndEndStream) {
  H2TestServer server;
  server.on("GET", "/api/v1/pods",
            [](const H2Request&) { return H2Reply::json(R"({"items":[]})"); });
  H2TestClient client(server);
  const h2::SettingsFrame settings = client.open();
  ASSERT_EQ(settings.settings.size(), 1u);
  EXPECT_EQ(settings.settings[0], (h2::Setting{h2::SettingId::max_concurrent_streams, 1000}));

  client.request(1, "GET", "/api/v1/pods?limit=5", {{"accept", "application/json"}});
  const H2TestFrame headers = client.expect(FrameType::headers);
  EXPECT_EQ(headers.header.stream_id, 1u);
  EXPECT_TRUE(headers.header.has(h2::kFlagEndHeaders));
  EXPECT_FALSE(headers.header.has(h2::kFlagEndStream));
  EXPECT_EQ(
      client.fields(headers),
      (std::vector<h2::HeaderField>{
          {":status", "200"}, {"content-type", "application/json"}, {"content-length", "12"}}));
  const auto data = client.expect<h2::DataFrame>();
  EXPECT_EQ(data.stream_id, 1u);
  EXPECT_TRUE(data.end_stream);
  EXPECT_EQ(data.data, R"({"items":[]})");

  ASSERT_TRUE(server.wait_requests(1, kH2Wait));
  const H2Request request = server.requests().at(0);
  EXPECT_EQ(request.connection, 1u);
  EXPECT_EQ(request.stream_id, 1u);
  EXPECT_EQ(request.method, "GET");
  EXPECT_EQ(request.path, "/api/v1/pods?limit=5");
  EXPECT_EQ(request.authority, "127.0.0.1");
  EXPECT_EQ(request.scheme, "https");
  EXPECT_EQ(request.header("Accept"), "application/json");
  EXPECT_TRUE(server.wait_until([&] { return server.open_streams(1) == 0; }, kH2Wait));
  EXPECT_EQ(server.connections(), 1u);
  EXPECT_EQ(server.client_setting(1, h2::SettingId::enable_push), 0u);
  EXPECT_EQ(server.settings_acks(1), 1u);
  EXPECT_EQ(server.frames_received(1, FrameType::settings), 2u);
  EXPECT_EQ(server.frames_received(1, FrameType::headers), 1u);
  EXPECT_TRUE(server.errors().empty());
}

TEST(H2TestServer, StreamingReplyWaitsForTheFlowControlWindows) {
  H2TestServer server;
  auto stream = std::make_shared<H2Stream>();
  server.on("GET", "/api/v1/pods", [&](const H2Request&) { return H2Reply::streaming(stream); });
  H2TestClient client(server);
  client.open();
  client.request(1, "GET", "/api/v1/pods?watch=1");
  ASSERT_TRUE(stream->wait_started(kH2Wait));
  EXPECT_EQ(stream->id(), 1u);
  const H2TestFrame headers = client.expect(FrameType::headers);
  EXPECT_FALSE(headers.header.has(h2::kFlagEndStream));

  // 65,535 bytes fit in both windows; the rest waits.
  stream->send(std::string(100000, 'x'));
  ASSERT_TRUE(stream->wait_blocked(kH2Wait));
  EXPECT_EQ(stream->bytes_sent(), 65535u);
  EXPECT_EQ(stream->bytes_queued(), 100000u - 65535u);
  EXPECT_EQ(client.read_data(1, 65535), 65535u);

  // The stream's window alone is not enough: the connection's is used up too.
  client.window_update(1, 50000);
  ASSERT_TRUE(stream->wait_window_updates(50000, kH2Wait));
  EXPECT_EQ(stream->bytes_sent(), 65535u);
  EXPECT_TRUE(stream->wait_blocked(0ms));

  client.window_update(0, 50000);
  ASSERT_TRUE(stream->wait_sent(100000, kH2Wait));
  EXPECT_EQ(stream->bytes_queued(), 0u);
  EXPECT_EQ(client.read_data(1, 100000 - 65535), 100000u - 65535u);

  stream->end();
  const auto last = client.expect<h2::DataFrame>();
  EXPECT_TRUE(last.end_stream);
  EXPECT_TRUE(last.data.empty());
  EXPECT_TRUE(stream->wait_closed(kH2Wait));
  stream->send("ignored");
  EXPECT_EQ(stream->bytes_queued(), 0u);
  EXPECT_EQ(server.connection_window_updates(1), 50000u);
  EXPECT_EQ(server.stream_window_updates(1, 1), 50000u);
  EXPECT_TRUE(server.wait_until([&] { return server.open_streams(1) == 0; }, kH2Wait));
  EXPECT_TRUE(server.errors().empty());
}

TEST(H2TestServer, AnswersPingsUnlessToldNotToAndCountsAcksOfItsOwn) {
  H2TestServer server;
  H2TestClient client(server);
  client.open();
  client.ping({1, 2, 3, 4, 5, 6, 7, 8});
  auto ack = client.expect<h2::PingFrame>();
  EXPECT_TRUE(ack.ack);
  EXPECT_EQ(ack.opaque, (h2::PingData{1, 2, 3, 4, 5, 6, 7, 8}));

  server.set_answer_pings(false);
  client.ping({2, 0, 0, 0, 0, 0, 0, 0});
  ASSERT_TRUE(server.wait_client_pings(1, 2, kH2Wait));
  server.set_answer_pings(true);
  client.ping({3, 0, 0, 0, 0, 0, 0, 0});
  ack = client.expect<h2::PingFrame>();  // not the second's
  EXPECT_EQ(ack.opaque, (h2::PingData{3, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(server.client_pings(1), 3u);

  server.ping(1);
  const auto ping = client.expect<h2::PingFrame>();
  EXPECT_FALSE(ping.ack);
  client.ping(ping.opaque, true);
  EXPECT_TRUE(server.wait_until([&] { return server.ping_acks(1) == 1; }, kH2Wait));
  EXPECT_EQ(server.client_pings(1), 3u);
  EXPECT_TRUE(server.errors().empty());
}

TEST(H2TestServer, RefusesStreamsPastMaxConcurrentStreams) {
  H2TestServer server({.max_concurrent_streams = 1});
  auto stream = std::make_shared<H2Stream>();
  server.on("GET", "/watch", [&](const H2Request&) { return H2Reply::streaming(stream); });
  H2TestClient client(server);
  client.open();
  client.request(1, "GET", "/watch");
  EXPECT_EQ(client.expect(FrameType::headers).header.stream_id, 1u);
  client.request(3, "GET", "/watch");
  const auto rst = client.expect<h2::RstStreamFrame>();
  EXPECT_EQ(rst.stream_id, 3u);
  EXPECT_EQ(rst.error_code, ErrorCode::refused_stream);
  EXPECT_EQ(server.refused_streams(), 1u);
  EXPECT_EQ(server.requests().size(), 1u);
  EXPECT_EQ(server.open_streams(1), 1u);
  EXPECT_TRUE(server.errors().empty());
}

TEST(H2TestServer, GoawayRefusesNewStreamsAndClosesOnceTheLastOneEnds) {
  H2TestServer server;
  auto stream = std::make_shared<H2Stream>();
  server.on("GET", "/watch", [&](const H2Request&) { return H2Reply::streaming(stream); });
  H2TestClient client(server);
  client.open();
  client.request(1, "GET", "/watch");
  client.expect(FrameType::headers);
  server.goaway(1, 1, ErrorCode::no_error, "shutting down");
  const auto goaway = client.expect<h2::GoawayFrame>();
  EXPECT_EQ(goaway.last_stream_id, 1u);
  EXPECT_EQ(goaway.error_code, ErrorCode::no_error);
  EXPECT_EQ(goaway.debug_data, "shutting down");

  client.request(3, "GET", "/watch");
  const auto rst = client.expect<h2::RstStreamFrame>();
  EXPECT_EQ(rst.stream_id, 3u);
  EXPECT_EQ(rst.error_code, ErrorCode::refused_stream);

  stream->send("{}\n");
  stream->end();
  EXPECT_EQ(client.read_body(1), "{}\n");
  EXPECT_FALSE(client.read_frame().has_value());  // close_notify
  client.close();
  EXPECT_TRUE(server.wait_connection_closed(1, kH2Wait));
  EXPECT_TRUE(server.wait_until([&] { return !server.connection_open(1); }, kH2Wait));
  EXPECT_EQ(server.refused_streams(), 1u);
  EXPECT_TRUE(server.errors().empty());
}

TEST(H2TestServer, ReadsARequestBodyAndResetsAMalformedRequest) {
  H2TestServer server;
  server.on("POST", "/api/v1/namespaces/default/configmaps",
            [](const H2Request& r) { return H2Reply::json(r.body, 201); });
  H2TestClient client(server);
  client.open();
  client.request(1, "POST", "/api/v1/namespaces/default/configmaps",
                 {{"content-type", "application/json"}}, false);
  client.data(1, R"({"kind":"ConfigMap"})", true);
  // The server gives the connection's window back at once; the stream's is over.
  const auto update = client.expect<h2::WindowUpdateFrame>();
  EXPECT_EQ(update.stream_id, 0u);
  EXPECT_EQ(update.increment, 20u);
  EXPECT_EQ(client.fields(client.expect(FrameType::headers)).at(0),
            (h2::HeaderField{":status", "201"}));
  const auto data = client.expect<h2::DataFrame>();
  EXPECT_EQ(data.data, R"({"kind":"ConfigMap"})");
  EXPECT_TRUE(data.end_stream);
  ASSERT_TRUE(server.wait_requests(1, kH2Wait));
  EXPECT_EQ(server.requests().at(0).body, R"({"kind":"ConfigMap"})");
  EXPECT_TRUE(server.errors().empty());

  client.request(3, "GET", "/api/v1/pods", {{"connection", "keep-alive"}});
  const auto rst = client.expect<h2::RstStreamFrame>();
  EXPECT_EQ(rst.stream_id, 3u);
  EXPECT_EQ(rst.error_code, ErrorCode::protocol_error);
  const auto errors = server.errors();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("connection-specific field 'connection'"), std::string::npos)
      << errors[0];
}

TEST(H2TestServer, AnswersABadPrefaceWithGoaway) {
  H2TestServer server;
  H2TestClient client(server);
  client.write("GET / HTTP/1.1\r\n\r\n");
  client.expect(FrameType::settings);  // sent before the server read anything
  const auto goaway = client.expect<h2::GoawayFrame>();
  EXPECT_EQ(goaway.error_code, ErrorCode::protocol_error);
  EXPECT_FALSE(client.read_frame().has_value());
  const auto errors = server.errors();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("not the HTTP/2 preface"), std::string::npos) << errors[0];
}

TEST(H2TestServer, CloseCutsTheConnectionAndStreamsOutliveTheServer) {
  auto stream = std::make_shared<H2Stream>();
  {
    H2TestServer server;
    server.on("GET", "/watch", [&](const H2Request&) { return H2Reply::streaming(stream); });
    H2TestClient first(server);
    first.open();
    server.close(1);
    EXPECT_FALSE(first.read_frame().has_value());
    EXPECT_TRUE(server.wait_until([&] { return !server.connection_open(1); }, kH2Wait));

    H2TestClient second(server);
    second.open();
    second.request(1, "GET", "/watch");
    ASSERT_TRUE(stream->wait_started(kH2Wait));
    EXPECT_EQ(server.connections(), 2u);
    EXPECT_TRUE(server.errors().empty());
  }  // the server goes first, with the second connection and its stream open
  EXPECT_TRUE(stream->closed());
  stream->send("ignored");
  stream->end();
  EXPECT_EQ(stream->bytes_queued(), 0u);
}

}  // namespace
}  // namespace kinformer::testing
