#include "tls_stream.h"

#include <sys/socket.h>

#include <cerrno>
#include <new>

#include <openssl/crypto.h>
#include <openssl/err.h>

namespace kinformer::client::detail {

// OpenSSL's own socket BIO writes with write(2): a peer that reset the connection would raise
// SIGPIPE in the embedding process. This one sends with MSG_NOSIGNAL and notes EOF and errno
// for attempt().
int TlsStream::bio_write(BIO* bio, const char* data, std::size_t size, std::size_t* written) {
  auto* t = static_cast<Transport*>(BIO_get_data(bio));
  BIO_clear_retry_flags(bio);
  const ssize_t n = ::send(t->fd, data, size, MSG_NOSIGNAL);
  if (n >= 0) {
    *written = static_cast<std::size_t>(n);
    return 1;
  }
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
    BIO_set_retry_write(bio);
  } else {
    t->error = errno;
  }
  return 0;
}

int TlsStream::bio_read(BIO* bio, char* data, std::size_t size, std::size_t* read) {
  auto* t = static_cast<Transport*>(BIO_get_data(bio));
  BIO_clear_retry_flags(bio);
  const ssize_t n = ::recv(t->fd, data, size, 0);
  if (n > 0) {
    *read = static_cast<std::size_t>(n);
    return 1;
  }
  if (n == 0) {
    t->eof = true;
  } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
    BIO_set_retry_read(bio);
  } else {
    t->error = errno;
  }
  return 0;
}

long TlsStream::bio_ctrl(BIO* bio, int cmd, long /*num*/, void* /*ptr*/) {
  switch (cmd) {
    case BIO_CTRL_FLUSH:
      return 1;  // nothing is buffered: every write went to the socket
    case BIO_CTRL_EOF:
      return static_cast<Transport*>(BIO_get_data(bio))->eof ? 1 : 0;
    default:
      return 0;
  }
}

BIO_METHOD* TlsStream::bio_method() {
  // Made once and kept for the process: every stream's BIO refers to it.
  static BIO_METHOD* const method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "kinformer-socket");
    if (m == nullptr) return m;
    BIO_meth_set_write_ex(m, &TlsStream::bio_write);
    BIO_meth_set_read_ex(m, &TlsStream::bio_read);
    BIO_meth_set_ctrl(m, &TlsStream::bio_ctrl);
    BIO_meth_set_create(m, [](BIO* b) {
      BIO_set_init(b, 1);
      return 1;
    });
    return m;
  }();
  return method;
}

TlsStream::TlsStream(const asio::any_io_executor& ex, ssl::context& ctx) : tcp_(ex) {
  BIO_METHOD* method = bio_method();
  ssl_ = SSL_new(ctx.native_handle());
  BIO* bio = method != nullptr && ssl_ != nullptr ? BIO_new(method) : nullptr;
  if (bio == nullptr) {
    SSL_free(ssl_);
    throw std::bad_alloc();
  }
  BIO_set_data(bio, &transport_);
  SSL_set_bio(ssl_, bio, bio);  // the SSL owns the BIO now
  SSL_set_connect_state(ssl_);
  // A write retried after a wait may come from a moved operation; the bytes are the same.
  SSL_set_mode(ssl_, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS);
}

TlsStream::~TlsStream() {
  if (deadline_) {
    deadline_->socket = nullptr;
    deadline_->timer.cancel();
  }
  SSL_free(ssl_);
}

void TlsStream::expires_at(time_point deadline) {
  tcp_.expires_at(deadline);
  if (!deadline_) {
    deadline_ = std::make_shared<Deadline>(tcp_.get_executor());
    deadline_->socket = &tcp_.socket();
  }
  Deadline& d = *deadline_;
  d.passed = false;
  const std::uint64_t generation = ++d.generation;
  d.timer.expires_at(deadline);  // cancels the previous deadline's wait
  d.timer.async_wait([d = deadline_, generation](error_code ec) {
    // A wait that had already completed when the deadline was moved still runs, with no error:
    // only the current deadline may cut the stream.
    if (ec || generation != d->generation || d->socket == nullptr) return;
    d->passed = true;
    error_code ignored;
    d->socket->cancel(ignored);
  });
}

void TlsStream::expires_never() {
  tcp_.expires_never();
  if (!deadline_) return;
  ++deadline_->generation;
  deadline_->passed = false;
  deadline_->timer.cancel();
}

void TlsStream::cancel() {
  cancelled_ = true;
  error_code ignored;
  tcp_.socket().cancel(ignored);
}

bool openssl_frees_buffers_safely(unsigned long version) {
  const unsigned long major = version >> 28;  // 0xMNN00PP0
  const unsigned long minor = (version >> 20) & 0xff;
  const unsigned long patch = (version >> 4) & 0xff;
  if (major != 3) return major > 3;
  switch (minor) {
    case 0:
      return patch >= 14;
    case 1:
      return patch >= 6;
    case 2:
      return patch >= 2;
    case 3:
      return patch >= 1;
    default:
      return true;
  }
}

bool TlsStream::frees_idle_buffers() {
  static const bool safe = openssl_frees_buffers_safely(OpenSSL_version_num());
  return safe;
}

void TlsStream::release_buffers() {
  // Refused (0), leaving what is in use, while a record is half read or a write is pending.
  if (frees_idle_buffers()) (void)SSL_free_buffers(ssl_);
}

error_code TlsStream::wait_failed(const error_code& ec) const {
  return deadline_passed() ? error_code(beast::error::timeout) : ec;
}

TlsStream::Outcome TlsStream::attempt(Step step, void* data, std::size_t size) {
  if (transport_.fd != tcp_.socket().native_handle()) {
    // The socket is the caller's to open (connect_close_on_exec): adopt it on first use.
    error_code ec;
    tcp_.socket().non_blocking(true, ec);
    if (ec) return {ec};
    transport_.fd = tcp_.socket().native_handle();
  }
  transport_.error = 0;
  ERR_clear_error();
  std::size_t n = 0;
  int rc = 0;
  switch (step) {
    case Step::handshake:
      rc = SSL_do_handshake(ssl_);
      break;
    case Step::read:
      rc = SSL_read_ex(ssl_, data, size, &n);
      break;
    case Step::write:
      rc = SSL_write_ex(ssl_, data, size, &n);
      break;
  }
  if (rc == 1) return {{}, n};
  Outcome out;
  switch (SSL_get_error(ssl_, rc)) {
    case SSL_ERROR_WANT_READ:
      out.want = Want::read;
      break;
    case SSL_ERROR_WANT_WRITE:
      out.want = Want::write;
      break;
    case SSL_ERROR_ZERO_RETURN:  // the server's close_notify
      out.ec = asio::error::eof;
      break;
    case SSL_ERROR_SYSCALL:
      if (transport_.error != 0) {
        out.ec = error_code(transport_.error, boost::system::system_category());
      } else {
        out.ec = ssl::error::stream_truncated;  // closed without close_notify
      }
      break;
    case SSL_ERROR_SSL: {
      // As Asio's stream: the first error (the cause), or stream_truncated for a connection
      // closed without close_notify (OpenSSL 3 reports that as an SSL error).
      unsigned long first = 0;  // OpenSSL's error type
      for (;;) {
        const unsigned long e = ERR_get_error();
        if (e == 0) break;
        if (first == 0) first = e;
        if (ERR_GET_LIB(e) == ERR_LIB_SSL &&
            ERR_GET_REASON(e) == SSL_R_UNEXPECTED_EOF_WHILE_READING) {
          out.ec = ssl::error::stream_truncated;
        }
      }
      if (!out.ec) {
        out.ec = first != 0 ? error_code(static_cast<int>(first), asio::error::get_ssl_category())
                            : error_code(ssl::error::unexpected_result);
      }
      break;
    }
    default:  // a state no setting of ours asks for (X509 lookup, async, client hello callback)
      out.ec = ssl::error::unexpected_result;
      break;
  }
  ERR_clear_error();  // nothing left for the next SSL call on this thread to misread
  return out;
}

}  // namespace kinformer::client::detail
