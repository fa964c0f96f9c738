// libFuzzer target: an HTTP/2 session (client/src/http2/session.h) reading what a server sends.
// The frame reader and HPACK have a target of their own (hpack_fuzz); this one drives the
// session's state: streams opened, held, released and reset by their owners while the server's
// frames arrive, flow control, GOAWAY, RST_STREAM, SETTINGS, PING and protocol errors.
//
// Each input is one connection over a socketpair (plain, no TLS): the peer sends an empty SETTINGS
// frame; once the session started and opened its streams, the input's bytes after its first
// two, then it ends its side. Byte 0 picks the
// stream window (b % 4: 1 MiB, 65,535, 100, 16,384), whether stream 1's owner holds its window
// from its first DATA on (b & 4), whether stream 3's owner resets it on its first DATA (b & 8),
// and whether owners give their window back after each DATA (b & 16, posted as a reader that
// catches up would). Byte 1 % 4 + 1 streams are opened (ids 1, 3, 5, 7) once the session
// started. Seeds: tests/fuzz/corpus/http2_session_fuzz/.
//
// Checked beyond "no crash": every stream's owner that did not reset it hears on_end exactly
// once and nothing after it (one that reset it hears nothing more); nothing before the head but
// the end (DATA of a stream without a response head is the
// server's error, never handed on); the session is closed once the server's side ended, within
// the bound of a run (a hang aborts).
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <sys/socket.h>
#include <unistd.h>

#include "connection.h"
#include "fuzz_input.h"
#include "http2/session.h"

namespace {

using namespace kinformer::client;
using namespace kinformer::client::detail;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "http2_session_fuzz: %s\n", what);
  std::abort();
}

struct Owner final : Http2StreamHandler, std::enable_shared_from_this<Owner> {
  void on_head(HttpResponse) override {
    if (ended || was_reset) fail("head after the end");
    if (head) fail("a second head");
    head = true;
  }
  void on_data(std::string_view data) override {
    if (ended || was_reset) fail("DATA after the end");
    if (!head) fail("DATA before the head");
    if (data.empty()) return;
    if (hold_on_data && session) session->hold(id);
    if (reset_on_data && session) {
      // As a cancelled watch does: from the io thread, not within the session's callback. Its
      // owner hears nothing more of the stream after the reset.
      boost::asio::post(*io, [self = shared_from_this()] {
        if (self->ended || !self->session) return;
        self->session->reset(self->id);
        self->was_reset = true;
        self->session.reset();
      });
      reset_on_data = false;
    }
    if (release_after_data && session) {
      boost::asio::post(*io, [s = session, id = id] { s->release(id); });
    }
  }
  void on_read_done() override {
    if (ended || was_reset) fail("read done after the end");
  }
  void on_end(std::optional<Error>, bool) override {
    if (ended) fail("a second end");
    if (was_reset) fail("an end after the owner's reset");
    ended = true;
    session.reset();
  }

  boost::asio::io_context* io = nullptr;
  std::shared_ptr<Http2Session> session;
  std::uint32_t id = 0;
  bool hold_on_data = false;
  bool reset_on_data = false;
  bool release_after_data = false;
  bool head = false;
  bool ended = false;
  bool was_reset = false;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  kinformer::fuzz::Input in(data, size);
  const std::uint8_t flags = in.byte();
  const int streams = in.byte() % 4 + 1;
  const std::string_view server_bytes = in.rest();
  static constexpr std::uint32_t kWindows[] = {1U << 20, 65535, 100, 16384};

  boost::asio::io_context io;
  // The connection is a socketpair: a stream socket like TCP's to the session, and no ports,
  // handshakes or TIME_WAIT per input. One the machine cannot make is not a finding.
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return 0;
  auto conn = std::make_shared<Connection>(io.get_executor(), nullptr);
  tcp::socket peer(io);
  error_code ec;
  conn->plain->socket().assign(tcp::v4(), fds[0], ec);
  if (ec) ::close(fds[0]);
  error_code peer_ec;
  peer.assign(tcp::v4(), fds[1], peer_ec);
  if (peer_ec) ::close(fds[1]);
  if (ec || peer_ec) return 0;
  // An empty SETTINGS frame now; the input once the streams are open (below). Nothing of the
  // client's is read: the peer's buffers take it.
  static const std::string kSettings("\0\0\0\x04\0\0\0\0\0", 9);
  boost::asio::async_write(peer, boost::asio::buffer(kSettings), [](error_code, std::size_t) {});

  Http2SessionOptions options;
  options.stream_window = kWindows[flags % 4];
  options.server = "fuzz";
  options.ping_after = std::chrono::hours(1);
  options.ping_timeout = std::chrono::hours(1);
  options.idle_timeout = std::chrono::hours(1);
  auto session = std::make_shared<Http2Session>(conn, options, nullptr);
  std::vector<std::shared_ptr<Owner>> owners;
  boost::asio::co_spawn(
      io,
      [&]() -> boost::asio::awaitable<void> {
        Status started =
            co_await session->start(std::chrono::steady_clock::now() + std::chrono::seconds(5));
        if (!started.ok()) {
          error_code ignored;
          peer.shutdown(tcp::socket::shutdown_send, ignored);
          co_return;
        }
        for (int i = 0; i < streams && session->can_open(); ++i) {
          auto owner = std::make_shared<Owner>();
          owner->io = &io;
          owner->session = session;
          owner->hold_on_data = i == 0 && (flags & 4) != 0;
          owner->reset_on_data = i == 1 && (flags & 8) != 0;
          owner->release_after_data = (flags & 16) != 0;
          owners.push_back(owner);
          owner->id = session->open({{":method", "GET"},
                                     {":scheme", "https"},
                                     {":authority", "fuzz"},
                                     {":path", "/api/v1/pods?watch=true"}},
                                    owner);
        }
        co_await boost::asio::async_write(peer, boost::asio::buffer(server_bytes),
                                          boost::asio::as_tuple(boost::asio::use_awaitable));
        error_code ignored;
        peer.shutdown(tcp::socket::shutdown_send, ignored);
      },
      boost::asio::detached);
  io.run_for(std::chrono::seconds(5));
  if (!session->closed()) fail("the session outlived the server's end");
  for (const auto& owner : owners) {
    if (!owner->ended && !owner->was_reset) fail("a stream never heard its end");
  }
  return 0;
}
