#pragma once
// Private: the client side of a TLS connection, with OpenSSL reading and writing the TCP socket
// itself. Asio's TLS stream runs OpenSSL over a pair of memory BIOs and keeps four 17 KiB
// buffers per connection for as long as it lives; here a connection that waits between records
// holds none (OpenSSL frees its record buffers while they are empty, SSL_MODE_RELEASE_BUFFERS,
// and the stream frees the ones OpenSSL keeps before it waits, where that is safe:
// frees_idle_buffers()), and a watch is mostly waiting. Why, and what it saves:
// docs/decisions.md.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include <openssl/ssl.h>
#include <boost/asio/compose.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "net.h"

namespace kinformer::client::detail {

/// Whether SSL_free_buffers() is safe while a record is half read in this OpenSSL release
/// (`version` as OpenSSL_version_num() gives it): from 3.0.14, 3.1.6, 3.2.2 and 3.3.1 on; before,
/// it could free a buffer still in use (CVE-2024-4741). A distribution that backported the fix
/// under an older number counts as unsafe: safe, only without the saving.
bool openssl_frees_buffers_safely(unsigned long version);

/// A TLS client stream over a beast::tcp_stream (connected by the caller through next_layer()),
/// for Beast's HTTP reads and writes: async_handshake, async_read_some, async_write_some. At most
/// one read and one write at a time: HTTP/1.1 writes a request, then reads its response; HTTP/2
/// reads all along and writes between (OpenSSL allows a read and a write in turn on one
/// connection, and each waits for the socket on its own). One exception, which ends the
/// connection with an error: a read that must write (the answer to a TLS 1.3 KeyUpdate that asks
/// for one) while a write waits for the socket with a record half sent. Go's TLS servers do not
/// send such KeyUpdates; renegotiation, the TLS 1.2 case, is refused (tls.cc). Errors are Asio's
/// and OpenSSL's as from Asio's own TLS stream: eof after the server's close_notify,
/// ssl::error::stream_truncated when the connection ends without one, the SSL category for
/// OpenSSL's errors, beast::error::timeout once the deadline passed. Used on its connection's
/// strand of the io runtime, and destroyed there or once closed (close_io()); not movable
/// (OpenSSL's transport refers to it).
class TlsStream {
 public:
  using executor_type = asio::any_io_executor;
  using time_point = std::chrono::steady_clock::time_point;

  /// A stream on `ex` with a connection state of `ctx` (which must outlive it). Throws
  /// std::bad_alloc when OpenSSL cannot allocate it.
  TlsStream(const asio::any_io_executor& ex, ssl::context& ctx);
  ~TlsStream();
  TlsStream(const TlsStream&) = delete;
  TlsStream& operator=(const TlsStream&) = delete;

  executor_type get_executor() { return tcp_.get_executor(); }
  beast::tcp_stream& next_layer() { return tcp_; }
  [[nodiscard]] SSL* native_handle() const { return ssl_; }

  /// The deadline of every operation from now on, the TCP connect's included: when it passes,
  /// an operation in progress ends with beast::error::timeout, and so do later ones.
  void expires_at(time_point deadline);
  void expires_never();
  /// Ends the operation in progress with asio::error::operation_aborted, and any started before
  /// uncancel(): unlike a bare cancel of the socket, it also ends an operation that is between
  /// two waits (part of a TLS record came, the rest has not).
  void cancel();
  void uncancel() { cancelled_ = false; }
  /// Whether a read that waits for data frees the record buffers OpenSSL keeps (the write
  /// buffer it sets up to read TLS 1.3's session tickets) with the OpenSSL this process runs:
  /// only where SSL_free_buffers() is safe while a record is half read
  /// (openssl_frees_buffers_safely). Elsewhere waiting connections keep that buffer.
  static bool frees_idle_buffers();

  /// Completes with (error_code) once the handshake is done (call after connecting).
  template <class Token>
  auto async_handshake(Token&& token) {
    return run(Step::handshake, nullptr, 0, std::forward<Token>(token));
  }
  /// Completes with (error_code, bytes): decrypted bytes into the first non-empty buffer.
  template <class Buffers, class Token>
  auto async_read_some(const Buffers& buffers, Token&& token) {
    for (auto it = asio::buffer_sequence_begin(buffers); it != asio::buffer_sequence_end(buffers);
         ++it) {
      asio::mutable_buffer b(*it);
      if (b.size() != 0) return run(Step::read, b.data(), b.size(), std::forward<Token>(token));
    }
    return run(Step::read, nullptr, 0, std::forward<Token>(token));
  }
  /// Completes with (error_code, bytes). A sequence of several buffers (Beast's serialized
  /// headers are many small ones) is copied into one first, up to a TLS record's worth, so that
  /// it goes as one record, not one per piece.
  template <class Buffers, class Token>
  auto async_write_some(const Buffers& buffers, Token&& token) {
    auto it = asio::buffer_sequence_begin(buffers);
    const auto end = asio::buffer_sequence_end(buffers);
    while (it != end && asio::const_buffer(*it).size() == 0) ++it;
    if (it == end) return run(Step::write, nullptr, 0, std::forward<Token>(token));
    asio::const_buffer first(*it);
    if (std::next(it) == end || first.size() >= kRecord) {
      return run(Step::write, const_cast<void*>(first.data()), std::min(first.size(), kRecord),
                 std::forward<Token>(token));
    }
    std::vector<char> joined;
    joined.reserve(std::min(kRecord, asio::buffer_size(buffers)));
    for (; it != end && joined.size() < kRecord; ++it) {
      asio::const_buffer b(*it);
      const std::size_t n = std::min(b.size(), kRecord - joined.size());
      const char* p = static_cast<const char*>(b.data());
      joined.insert(joined.end(), p, p + n);
    }
    return run(Step::write, nullptr, 0, std::forward<Token>(token), std::move(joined));
  }

 private:
  static constexpr std::size_t kRecord = std::size_t{16} * 1024;  // TLS's largest plaintext record
  enum class Step { handshake, read, write };
  enum class Want { nothing, read, write };
  struct Outcome {
    error_code ec;
    std::size_t bytes = 0;
    Want want = Want::nothing;  // not done: wait until the socket is readable or writable
  };
  /// The deadline's timer, shared with its wait: a wait that completes after the stream is gone
  /// finds `socket` null and touches nothing.
  struct Deadline {
    explicit Deadline(const asio::any_io_executor& ex) : timer(ex) {}
    asio::steady_timer timer;
    std::uint64_t generation = 0;
    bool passed = false;
    tcp::socket* socket = nullptr;
  };

  /// One try of `step` with OpenSSL on the non-blocking socket.
  Outcome attempt(Step step, void* data, std::size_t size);
  /// Frees OpenSSL's record buffers if they hold nothing, before a read waits for data. OpenSSL
  /// frees them itself after a record or a write (SSL_MODE_RELEASE_BUFFERS), but not the write
  /// buffer it sets up while reading TLS 1.3's post-handshake messages (session tickets): 16 KiB
  /// that every connection, so every watch, would hold for as long as it lives. Does nothing
  /// unless frees_idle_buffers().
  void release_buffers();
  /// What a failed wait for the socket means: a timeout once the deadline passed.
  error_code wait_failed(const error_code& ec) const;
  [[nodiscard]] bool deadline_passed() const { return deadline_ && deadline_->passed; }

  /// Tries the step until it is done, waiting for the socket in between. Never completes inside
  /// the initiating call.
  struct Op {
    TlsStream& s;
    Step step;
    void* data;
    std::size_t size;
    std::vector<char> joined;  // a write's copy of its buffers (data points into it)
    bool waited = false;
    bool done = false;
    error_code result;
    std::size_t bytes = 0;

    template <class Self>
    void operator()(Self& self, error_code wait_ec = {}) {
      if (done) {
        self.complete(result, bytes);
        return;
      }
      if (wait_ec || s.deadline_passed() || s.cancelled_) {
        finish(self, s.wait_failed(wait_ec ? wait_ec : asio::error::operation_aborted), 0);
        return;
      }
      if (step != Step::handshake && size == 0) {
        finish(self, {}, 0);
        return;
      }
      const Outcome o = s.attempt(step, data, size);
      if (o.want == Want::nothing) {
        finish(self, o.ec, o.bytes);
        return;
      }
      waited = true;
      if (step == Step::read && o.want == Want::read) s.release_buffers();
      s.tcp_.socket().async_wait(
          o.want == Want::read ? tcp::socket::wait_read : tcp::socket::wait_write, std::move(self));
    }
    template <class Self>
    void finish(Self& self, error_code ec, std::size_t n) {
      if (waited) {
        self.complete(ec, n);
        return;
      }
      done = true;
      result = ec;
      bytes = n;
      asio::post(std::move(self));
    }
  };

  /// `joined`, when not empty, is a write's copy of its buffers, and what it writes.
  template <class Token>
  auto run(Step step, void* data, std::size_t size, Token&& token, std::vector<char> joined = {}) {
    if (!joined.empty()) {
      data = joined.data();  // a vector's move keeps its storage: the operation's copy is this
      size = joined.size();
    }
    return asio::async_compose<Token, void(error_code, std::size_t)>(
        Op{*this, step, data, size, std::move(joined)}, token, tcp_.socket());
  }

  beast::tcp_stream tcp_;
  SSL* ssl_ = nullptr;
  bool cancelled_ = false;
  std::shared_ptr<Deadline> deadline_;  // made by the first expires_at()
  /// What OpenSSL's socket transport last saw (read by its BIO's control call and by attempt()).
  struct Transport {
    int fd = -1;
    bool eof = false;  ///< the peer closed its side (a read returned 0)
    int error = 0;     ///< errno of the last failed send or recv, 0 if none
  } transport_;
  static int bio_write(BIO* bio, const char* data, std::size_t size, std::size_t* written);
  static int bio_read(BIO* bio, char* data, std::size_t size, std::size_t* read);
  static long bio_ctrl(BIO* bio, int cmd, long num, void* ptr);
  static BIO_METHOD* bio_method();
};

}  // namespace kinformer::client::detail
