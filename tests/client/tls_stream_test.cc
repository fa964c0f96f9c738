// kinformer's TLS stream against a server on Asio's TLS stream, on one io_context driven by the
// test: how a connection's end is reported (close_notify or not), a write larger than the
// socket buffers (OpenSSL's write waits for the socket), a deadline inside the handshake, and
// the sticky cancel, also when it lands between a read's wait and its next try, and the memory a
// read holds while it waits.

#include "tls_stream.h"

#include <poll.h>
#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <openssl/crypto.h>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include "certs.h"

namespace kinformer::client::detail {
namespace {

using namespace std::chrono_literals;

// OpenSSL's live allocations of a record buffer's size (16 KiB) or more, seen through its
// allocation hooks. The hooks go in during static initialisation, before OpenSSL allocates
// anything (it refuses them afterwards: then openssl_hooked is false).
constexpr std::size_t kLarge = std::size_t{16} * 1024;
struct LargeAllocations {
  std::mutex mu;
  std::set<void*> live;
};
LargeAllocations& large() {
  static auto* const l = new LargeAllocations;  // outlives every OpenSSL free at exit
  return *l;
}
void* hooked_malloc(std::size_t n, const char* /*file*/, int /*line*/) {
  void* p = std::malloc(n);
  if (p != nullptr && n >= kLarge) {
    std::lock_guard lock(large().mu);
    large().live.insert(p);
  }
  return p;
}
void hooked_free(void* p, const char* /*file*/, int /*line*/) {
  if (p != nullptr) {
    std::lock_guard lock(large().mu);
    large().live.erase(p);
  }
  std::free(p);
}
void* hooked_realloc(void* p, std::size_t n, const char* file, int line) {
  if (n == 0) {
    hooked_free(p, file, line);
    return nullptr;
  }
  void* q = std::realloc(p, n);
  if (q != nullptr) {
    std::lock_guard lock(large().mu);
    if (p != nullptr) large().live.erase(p);
    if (n >= kLarge) large().live.insert(q);
  }
  return q;
}
const bool openssl_hooked =
    CRYPTO_set_mem_functions(&hooked_malloc, &hooked_realloc, &hooked_free) == 1;

std::set<void*> large_openssl_allocations() {
  std::lock_guard lock(large().mu);
  return large().live;
}

/// The result of one asynchronous operation, once it completed.
struct Done {
  std::optional<error_code> ec;
  std::size_t bytes = 0;
  /// Its error; in_progress when it did not complete.
  [[nodiscard]] error_code result() const { return ec.value_or(asio::error::in_progress); }
  auto handler() {
    return [this](error_code e, std::size_t n) {
      ec = e;
      bytes = n;
    };
  }
};

class TlsStreamTest : public ::testing::Test {
 protected:
  TlsStreamTest()
      : pki_(testing::make_pki()),
        server_ctx_(ssl::context::tls_server),
        client_ctx_(ssl::context::tls_client),
        acceptor_(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {
    server_ctx_.use_certificate_chain(asio::buffer(pki_.server.cert_pem));
    server_ctx_.use_private_key(asio::buffer(pki_.server.key_pem), ssl::context::pem);
    client_ctx_.add_certificate_authority(asio::buffer(pki_.ca.cert_pem));
    client_ctx_.set_verify_mode(ssl::verify_peer);
    // Both streams after their contexts are set: a connection takes its context's settings
    // when made.
    server_.emplace(io_, server_ctx_);
    client_.emplace(io_.get_executor(), client_ctx_);
  }

  /// Runs the io_context until `done` or, at the latest, 10 s (a guard against a hang, not a
  /// measure: every test asserts on what completed, never on how long it took). On a hang it
  /// closes every socket and runs what that ends, so no operation outlives the caller's buffers
  /// and results.
  template <class Pred>
  bool run_until(Pred done) {
    const auto give_up = std::chrono::steady_clock::now() + 10s;
    while (!done() && std::chrono::steady_clock::now() < give_up) {
      io_.restart();
      io_.run_one_for(100ms);
    }
    if (done()) return true;
    error_code ignored;
    acceptor_.close(ignored);
    server_->next_layer().close(ignored);
    client_->next_layer().socket().close(ignored);
    io_.restart();
    io_.poll();
    return false;
  }

  /// A TCP connection from the client's stream to the server's; no TLS yet.
  void connect() {
    std::optional<error_code> accepted;
    acceptor_.async_accept(server_->next_layer(), [&](error_code ec) { accepted = ec; });
    client_->next_layer().socket().connect(acceptor_.local_endpoint());
    ASSERT_TRUE(run_until([&] { return accepted.has_value(); }));
    ASSERT_FALSE(*accepted) << accepted->message();
  }

  /// connect(), then both sides' handshakes.
  void handshake() {
    ASSERT_NO_FATAL_FAILURE(connect());
    std::optional<error_code> server_done;
    Done client_done;
    server_->async_handshake(ssl::stream_base::server, [&](error_code ec) { server_done = ec; });
    client_->async_handshake(client_done.handler());
    ASSERT_TRUE(run_until([&] { return server_done && client_done.ec; }));
    ASSERT_FALSE(*server_done) << server_done->message();
    ASSERT_FALSE(client_done.result()) << client_done.result().message();
  }

  /// The server sends `text`.
  void server_sends(const std::string& text) {
    Done sent;
    asio::async_write(*server_, asio::buffer(text), sent.handler());
    ASSERT_TRUE(run_until([&] { return sent.ec.has_value(); }));
    ASSERT_FALSE(sent.result()) << sent.result().message();
  }

  /// One read of the client's, to its end.
  Done client_reads(std::string& into) {
    into.assign(256, '\0');
    Done read;
    client_->async_read_some(asio::buffer(into), read.handler());
    EXPECT_TRUE(run_until([&] { return read.ec.has_value(); }));
    into.resize(read.bytes);
    return read;
  }

  /// The client reads `text`, then its next read ends with `end`.
  void client_reads_then_ends(const std::string& text, error_code end) {
    std::string got;
    Done first = client_reads(got);
    ASSERT_FALSE(first.result()) << first.result().message();
    EXPECT_EQ(got, text);
    Done last = client_reads(got);
    EXPECT_EQ(last.result(), end) << last.result().message();
  }

  testing::Pki pki_;
  asio::io_context io_;
  ssl::context server_ctx_;
  ssl::context client_ctx_;
  tcp::acceptor acceptor_;
  std::optional<ssl::stream<tcp::socket>> server_;
  std::optional<TlsStream> client_;
};

TEST_F(TlsStreamTest, TheServersCloseNotifyEndsTheStreamAsEof) {
  ASSERT_NO_FATAL_FAILURE(handshake());
  ASSERT_NO_FATAL_FAILURE(server_sends("last words"));
  // The server's shutdown sends close_notify, then waits for the client's (which never comes).
  server_->async_shutdown([](error_code) {});
  client_reads_then_ends("last words", asio::error::eof);
}

TEST_F(TlsStreamTest, AConnectionClosedWithoutCloseNotifyIsTruncated) {
  ASSERT_NO_FATAL_FAILURE(handshake());
  ASSERT_NO_FATAL_FAILURE(server_sends("cut"));
  server_->next_layer().close();
  client_reads_then_ends("cut", ssl::error::stream_truncated);
}

TEST_F(TlsStreamTest, AWriteLargerThanTheSocketBuffersWaitsForTheReaderAndArrivesWhole) {
  ASSERT_NO_FATAL_FAILURE(handshake());
  // Small kernel buffers on both sides: 4 MiB cannot be in flight at once, so the client's
  // SSL_write must wait for the socket to become writable again, many times over.
  const int small = 16 * 1024;
  ASSERT_EQ(::setsockopt(client_->next_layer().socket().native_handle(), SOL_SOCKET, SO_SNDBUF,
                         &small, sizeof small),
            0);
  ASSERT_EQ(::setsockopt(server_->next_layer().native_handle(), SOL_SOCKET, SO_RCVBUF, &small,
                         sizeof small),
            0);
  // A read first takes what the server sent after the handshake (TLS 1.3's session tickets):
  // nothing is left to read, so only the socket's room for writing can wake the writer.
  ASSERT_NO_FATAL_FAILURE(server_sends("go"));
  std::string go;
  ASSERT_FALSE(client_reads(go).result());
  ASSERT_EQ(go, "go");
  std::vector<char> out(std::size_t{4} << 20);
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<char>((i * 131) % 251);
  std::vector<char> in(out.size());

  Done written;
  Done read;
  asio::async_write(*client_, asio::buffer(out), written.handler());
  asio::async_read(*server_, asio::buffer(in), read.handler());
  ASSERT_TRUE(run_until([&] { return written.ec && read.ec; }));
  ASSERT_FALSE(written.result()) << written.result().message();
  ASSERT_FALSE(read.result()) << read.result().message();
  EXPECT_EQ(written.bytes, out.size());
  EXPECT_TRUE(in == out) << "the bytes the server read differ from those written";
}

TEST_F(TlsStreamTest, ADeadlineInsideTheHandshakeEndsItAsATimeout) {
  ASSERT_NO_FATAL_FAILURE(connect());  // the server accepts, and never answers the hello
  client_->expires_at(std::chrono::steady_clock::now() + 50ms);
  Done hs;
  client_->async_handshake(hs.handler());
  ASSERT_TRUE(run_until([&] { return hs.ec.has_value(); }));
  EXPECT_EQ(hs.result(), beast::error::timeout) << hs.result().message();
}

TEST_F(TlsStreamTest, ACancelEndsEveryReadUntilUncancelled) {
  ASSERT_NO_FATAL_FAILURE(handshake());
  // A cancel with no operation in progress still ends the next one: the watch's idle cut can
  // land between two reads' waits.
  client_->cancel();
  std::string got;
  Done cut = client_reads(got);
  EXPECT_EQ(cut.result(), asio::error::operation_aborted) << cut.result().message();
  Done again = client_reads(got);
  EXPECT_EQ(again.result(), asio::error::operation_aborted) << again.result().message();

  client_->uncancel();
  ASSERT_NO_FATAL_FAILURE(server_sends("after"));
  Done read = client_reads(got);
  ASSERT_FALSE(read.result()) << read.result().message();
  EXPECT_EQ(got, "after");
}

// HTTP/2 reads all along and writes between: a read that waits for the server stays pending
// while the client's writes go out whole, and then gets what the server answers.
TEST_F(TlsStreamTest, AReadWaitingForTheServerLetsWritesGoOutAndThenGetsTheAnswer) {
  ASSERT_NO_FATAL_FAILURE(handshake());
  std::string got(256, '\0');
  Done read;
  client_->async_read_some(asio::buffer(got), read.handler());
  std::string received;
  for (const std::string text : {"first", "second"}) {
    Done written;
    asio::async_write(*client_, asio::buffer(text), written.handler());
    std::string piece(text.size(), '\0');
    Done server_read;
    asio::async_read(*server_, asio::buffer(piece), server_read.handler());
    ASSERT_TRUE(run_until([&] { return written.ec && server_read.ec; }));
    ASSERT_FALSE(written.result()) << written.result().message();
    ASSERT_FALSE(server_read.result()) << server_read.result().message();
    received += piece;
    EXPECT_FALSE(read.ec.has_value()) << "the read waits for the server";
  }
  EXPECT_EQ(received, "firstsecond");
  ASSERT_NO_FATAL_FAILURE(server_sends("answer"));
  ASSERT_TRUE(run_until([&] { return read.ec.has_value(); }));
  ASSERT_FALSE(read.result()) << read.result().message();
  EXPECT_EQ(got.substr(0, read.bytes), "answer");
}

TEST_F(TlsStreamTest, ACancelEndsAReadThatWaitsForTheServer) {
  ASSERT_NO_FATAL_FAILURE(handshake());
  std::string buf(64, '\0');
  Done read;
  client_->async_read_some(asio::buffer(buf), read.handler());
  // The read tried OpenSSL when started, which wants bytes: it waits for the socket.
  io_.restart();
  io_.poll();
  ASSERT_FALSE(read.ec.has_value());
  client_->cancel();
  ASSERT_TRUE(run_until([&] { return read.ec.has_value(); }));
  EXPECT_EQ(read.result(), asio::error::operation_aborted) << read.result().message();
}

TEST(OpenSslFreesBuffersSafely, FromTheReleasesThatFixedSslFreeBuffers) {
  EXPECT_FALSE(openssl_frees_buffers_safely(0x101010ffUL));  // 1.1.1
  EXPECT_FALSE(openssl_frees_buffers_safely(0x30000020UL));  // 3.0.2
  EXPECT_FALSE(openssl_frees_buffers_safely(0x300000d0UL));  // 3.0.13
  EXPECT_TRUE(openssl_frees_buffers_safely(0x300000e0UL));   // 3.0.14
  EXPECT_TRUE(openssl_frees_buffers_safely(0x30000130UL));   // 3.0.19
  EXPECT_FALSE(openssl_frees_buffers_safely(0x30100050UL));  // 3.1.5
  EXPECT_TRUE(openssl_frees_buffers_safely(0x30100060UL));   // 3.1.6
  EXPECT_FALSE(openssl_frees_buffers_safely(0x30200010UL));  // 3.2.1
  EXPECT_TRUE(openssl_frees_buffers_safely(0x30200020UL));   // 3.2.2
  EXPECT_FALSE(openssl_frees_buffers_safely(0x30300000UL));  // 3.3.0
  EXPECT_TRUE(openssl_frees_buffers_safely(0x30300010UL));   // 3.3.1
  EXPECT_TRUE(openssl_frees_buffers_safely(0x30400000UL));   // 3.4.0
  EXPECT_TRUE(openssl_frees_buffers_safely(0x40000000UL));   // 4.0.0
}

TEST_F(TlsStreamTest, AReadThatWaitsForTheServerHoldsNoRecordBuffer) {
  if (!TlsStream::frees_idle_buffers()) {
    GTEST_SKIP() << "this OpenSSL (" << OpenSSL_version(OPENSSL_VERSION)
                 << ") is older than the releases where SSL_free_buffers is safe mid-record: "
                    "waiting connections keep their write buffer";
  }
  ASSERT_TRUE(openssl_hooked) << "OpenSSL's allocation hooks were not installed: something "
                                 "allocated through OpenSSL before static initialisation ended";
  ASSERT_NO_FATAL_FAILURE(handshake());
  // Reading this takes TLS 1.3's session tickets first. OpenSSL sets up both record buffers to
  // read them, and frees only the read buffer afterwards: the write buffer would stay until the
  // connection writes again, which a watch never does.
  ASSERT_NO_FATAL_FAILURE(server_sends("first"));
  const std::set<void*> before = large_openssl_allocations();  // the server's too
  std::string got;
  ASSERT_FALSE(client_reads(got).result());
  ASSERT_EQ(got, "first");
  std::string buf(64, '\0');
  Done read;
  client_->async_read_some(asio::buffer(buf), read.handler());
  io_.restart();
  io_.poll();
  ASSERT_FALSE(read.ec.has_value());
  std::size_t kept = 0;
  for (void* p : large_openssl_allocations()) kept += before.count(p) == 0 ? 1 : 0;
  EXPECT_EQ(kept, 0u) << "buffers of 16 KiB or more that OpenSSL allocated while the client read "
                         "and still holds while the next read waits";
  // And the waiting read gets what comes.
  ASSERT_NO_FATAL_FAILURE(server_sends("second"));
  ASSERT_TRUE(run_until([&] { return read.ec.has_value(); }));
  ASSERT_FALSE(read.result()) << read.result().message();
  EXPECT_EQ(buf.substr(0, read.bytes), "second");
  // Writing after the buffers were freed sets them up again.
  const std::string request = "third";
  Done sent;
  client_->async_write_some(asio::buffer(request), sent.handler());
  ASSERT_TRUE(run_until([&] { return sent.ec.has_value(); }));
  ASSERT_FALSE(sent.result()) << sent.result().message();
  EXPECT_EQ(sent.bytes, request.size());
  std::string echoed(request.size(), '\0');
  Done received;
  asio::async_read(*server_, asio::buffer(echoed), received.handler());
  ASSERT_TRUE(run_until([&] { return received.ec.has_value(); }));
  ASSERT_FALSE(received.result()) << received.result().message();
  EXPECT_EQ(echoed, request);
}

TEST_F(TlsStreamTest, ACancelBetweenTheSocketWakingAReadAndTheReadGoingOnEndsIt) {
  ASSERT_NO_FATAL_FAILURE(handshake());
  ASSERT_NO_FATAL_FAILURE(server_sends("go"));  // takes TLS 1.3's session tickets first
  std::string got;
  ASSERT_FALSE(client_reads(got).result());
  // The read's handler runs on `held`, and so does the rest of the read after each wait: once
  // the socket is readable, the read stays held between its wait and its next try, with bytes
  // ready for it. A cancel landing there finds no wait of the socket's to cancel.
  asio::io_context held;
  std::string buf(64, '\0');
  Done read;
  // However the test leaves, the read ends before `held`, `buf` and `read` go.
  struct EndTheRead {
    tcp::socket& socket;
    asio::io_context& io;
    asio::io_context& held;
    Done& read;
    ~EndTheRead() {
      if (read.ec) return;
      error_code ignored;
      socket.close(ignored);
      io.restart();
      io.poll();
      held.restart();
      held.poll();
    }
  } end_the_read{client_->next_layer().socket(), io_, held, read};
  client_->async_read_some(asio::buffer(buf), asio::bind_executor(held, read.handler()));
  ASSERT_NO_FATAL_FAILURE(server_sends("unread"));
  // The bytes are on the client's socket before the reactor looks (loopback may deliver late).
  pollfd readable{client_->next_layer().socket().native_handle(), POLLIN, 0};
  ASSERT_EQ(::poll(&readable, 1, 10000), 1);
  io_.restart();
  io_.poll();  // the reactor sees the socket readable and hands the read's wait to `held`
  ASSERT_FALSE(read.ec.has_value());
  client_->cancel();
  held.poll();
  EXPECT_EQ(read.result(), asio::error::operation_aborted) << read.result().message();
}

}  // namespace
}  // namespace kinformer::client::detail
