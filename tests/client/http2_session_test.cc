// Http2Session (client/src/http2/session.h) over a plain TCP connection to a peer that the test
// drives byte by byte: what the scripted TLS server cannot do, such as stop reading while it
// goes on sending. Small socket buffers on both sides make the session's writes stall after a
// few KiB instead of the megabytes that loopback's buffers would take.

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <poll.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "connection.h"
#include "http2/session.h"

namespace kinformer::client::detail {
namespace {

using namespace std::chrono_literals;

constexpr int kSmallBuffer = 4096;

// A frame as the server would send it: the 9-byte header, then `payload`.
std::string frame(std::uint8_t type, std::uint8_t flags, std::uint32_t stream,
                  const std::string& payload) {
  std::string out;
  const auto length = static_cast<std::uint32_t>(payload.size());
  out += static_cast<char>((length >> 16) & 0xff);
  out += static_cast<char>((length >> 8) & 0xff);
  out += static_cast<char>(length & 0xff);
  out += static_cast<char>(type);
  out += static_cast<char>(flags);
  out += static_cast<char>((stream >> 24) & 0x7f);
  out += static_cast<char>((stream >> 16) & 0xff);
  out += static_cast<char>((stream >> 8) & 0xff);
  out += static_cast<char>(stream & 0xff);
  return out + payload;
}

std::string empty_settings() { return frame(0x4, 0, 0, {}); }
std::string pings(std::size_t n) {
  const std::string one = frame(0x6, 0, 0, std::string(8, 'p'));
  std::string out;
  out.reserve(one.size() * n);
  for (std::size_t i = 0; i < n; ++i) out += one;
  return out;
}

// A stream's owner that records how the stream ended.
struct Recorder final : Http2StreamHandler {
  void on_head(HttpResponse) override {}
  void on_data(std::string_view) override {}
  void on_read_done() override {}
  void on_end(std::optional<Error> error, bool) override {
    std::lock_guard lock(mu);
    ended = true;
    this->error = std::move(error);
    cv.notify_all();
  }
  // True once ended; waits at most `timeout`.
  bool wait_ended(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, timeout, [&] { return ended; });
  }
  std::string message() {
    std::lock_guard lock(mu);
    return error ? error->message : "(ended without an error)";
  }

  std::mutex mu;
  std::condition_variable cv;
  bool ended = false;
  std::optional<Error> error;
};

// A session on a connection to `peer`, which reads nothing unless the test does.
class Http2SessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tcp::acceptor acceptor(peer_io_);
    acceptor.open(tcp::v4());
    // Inherited by the accepted socket, before its handshake: the window it offers stays small.
    acceptor.set_option(asio::socket_base::receive_buffer_size(kSmallBuffer));
    acceptor.bind({asio::ip::address_v4::loopback(), 0});
    acceptor.listen();
    conn_ = std::make_shared<Connection>(io_.get_executor(), nullptr);
    tcp::socket& client = conn_->plain->socket();
    client.open(tcp::v4());
    client.set_option(asio::socket_base::send_buffer_size(kSmallBuffer));
    client.connect(acceptor.local_endpoint());
    acceptor.accept(peer_);
    // The peer's writes and reads wait with a deadline (poll), never for ever.
    peer_.non_blocking(true);
  }

  void TearDown() override {
    // A write stalled on the peer fails once the peer closes with bytes unread (a reset).
    error_code ignored;
    peer_.close(ignored);
    if (session_)
      asio::post(io_, [s = session_] { s->close(Error::make(Errc::cancelled, "end")); });
    work_.reset();
    if (thread_.joinable()) thread_.join();
  }

  // Starts the session with these liveness options (the peer sends its SETTINGS) and opens one
  // stream, whose owner it returns (null if the session did not start).
  std::shared_ptr<Recorder> start(std::chrono::milliseconds ping_after,
                                  std::chrono::milliseconds ping_timeout) {
    auto recorder = std::make_shared<Recorder>();
    Http2SessionOptions options;
    options.ping_after = ping_after;
    options.ping_timeout = ping_timeout;
    options.server = "peer";
    session_ = std::make_shared<Http2Session>(conn_, options, nullptr);
    write(empty_settings());
    auto opened = std::make_shared<std::promise<bool>>();
    auto opened_future = opened->get_future();
    asio::co_spawn(
        io_,
        [this, opened, recorder]() -> awaitable<void> {
          Status started = co_await session_->start(std::chrono::steady_clock::now() + 10s);
          if (!started.ok() || !session_->can_open()) {
            opened->set_value(false);
            co_return;
          }
          session_->open({{":method", "GET"},
                          {":scheme", "http"},
                          {":authority", "peer"},
                          {":path", "/api/v1/pods?watch=true"}},
                         recorder);
          opened->set_value(true);
        },
        asio::detached);
    thread_ = std::thread([this] { io_.run(); });
    if (!opened_future.get()) {
      ADD_FAILURE() << "the session did not start";
      return nullptr;
    }
    return recorder;
  }

  // Waits until the peer's socket is ready for `events`, at most 50 ms.
  void poll_peer(short events) {
    pollfd p{peer_.native_handle(), events, 0};
    ::poll(&p, 1, 50);
  }

  // Writes to the client; false once the client closed the connection, `stop` returned true
  // while the client took nothing, or 30 s passed.
  bool write(
      const std::string& bytes, const std::function<bool()>& stop = [] { return false; }) {
    const auto give_up = std::chrono::steady_clock::now() + 30s;
    std::size_t done = 0;
    while (done < bytes.size()) {
      error_code ec;
      done += peer_.write_some(asio::buffer(bytes.data() + done, bytes.size() - done), ec);
      if (ec == asio::error::would_block) {
        if (stop() || std::chrono::steady_clock::now() >= give_up) return false;
        poll_peer(POLLOUT);
      } else if (ec) {
        return false;
      }
    }
    return true;
  }

  // Whether the client closed its end within `timeout`, seen without reading (a read would let
  // a stuck write finish, and the writer close the socket itself): a PING now and then, which a
  // closed socket answers with a reset, and the client's FIN if it gets through.
  bool client_closed_within(std::chrono::milliseconds timeout) {
    const auto give_up = std::chrono::steady_clock::now() + timeout;
    const std::string ping = pings(1);
    while (std::chrono::steady_clock::now() < give_up) {
      error_code ignored;
      peer_.write_some(asio::buffer(ping), ignored);
      pollfd p{peer_.native_handle(), POLLRDHUP, 0};
      if (::poll(&p, 1, 50) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0) return true;
    }
    return false;
  }

  asio::io_context io_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_{
      asio::make_work_guard(io_)};
  std::thread thread_;
  asio::io_context peer_io_;
  tcp::socket peer_{peer_io_};
  ConnectionPtr conn_;
  std::shared_ptr<Http2Session> session_;
};

TEST_F(Http2SessionTest, AServerThatStopsReadingWhileItGoesOnSendingIsGivenUp) {
  // The server's PINGs keep the connection looking alive (every read counts as an answer to
  // ours), while the acknowledgements of its PINGs cannot be written: the write stalls.
  auto recorder = start(100ms, 500ms);
  ASSERT_TRUE(recorder);
  // Many times what the small buffers hold: the client's writes stall.
  ASSERT_TRUE(write(pings(8000)));
  // Then a PING every 20 ms, so the client reads something all along, for at most 30 s.
  const auto give_up = std::chrono::steady_clock::now() + 30s;
  while (!recorder->wait_ended(20ms) && std::chrono::steady_clock::now() < give_up) {
    if (!write(pings(1))) break;
  }
  ASSERT_TRUE(recorder->wait_ended(0ms)) << "the connection was kept";
  EXPECT_NE(recorder->message().find("a write did not finish within 500 ms"), std::string::npos)
      << recorder->message();
  // The stuck write does not keep the socket: it is cut off after a second.
  EXPECT_TRUE(client_closed_within(10s));
}

TEST_F(Http2SessionTest, WhatWaitsToBeSentIsBounded) {
  // PINGs to acknowledge as fast as the server can send them, to a server that reads nothing:
  // with the liveness checks far off, only the bound on the send queue ends the connection.
  auto recorder = start(600s, 600s);
  ASSERT_TRUE(recorder);
  // 17 bytes of acknowledgement each: past the 1 MiB bound plus what the buffers hold.
  for (int i = 0; i < 20 && !recorder->wait_ended(0ms); ++i) {
    if (!write(pings(4000), [&] { return recorder->wait_ended(0ms); })) break;
  }
  ASSERT_TRUE(recorder->wait_ended(30s)) << "the send queue grew without bound";
  EXPECT_NE(recorder->message().find("wait to be sent: the server does not read"),
            std::string::npos)
      << recorder->message();
  EXPECT_TRUE(client_closed_within(10s));
}

}  // namespace
}  // namespace kinformer::client::detail
