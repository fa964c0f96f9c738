#include "tls_stream.h"

#include <sys/socket.h>

#include <cerrno>
#include <deque>
#include <mutex>
#include <new>

#include <openssl/err.h>
#include <openssl/x509.h>

namespace kinformer::client::detail {
namespace {

// A handful covers a client's connections to one server opened at about the same time; each
// ticket holds a session's secrets and the server's certificates.
constexpr std::size_t kTicketsKept = 4;

// The session tickets kept with one SSL context, newest last; freed with the context.
struct Tickets {
  std::mutex mu;
  std::deque<SSL_SESSION*> kept;  // guarded by mu
  Tickets() = default;
  Tickets(const Tickets&) = delete;
  Tickets& operator=(const Tickets&) = delete;
  ~Tickets() {
    for (SSL_SESSION* s : kept) SSL_SESSION_free(s);
  }
};

void free_tickets(void* /*ctx*/, void* tickets, CRYPTO_EX_DATA* /*data*/, int /*index*/,
                  long /*argl*/, void* /*argp*/) {
  delete static_cast<Tickets*>(tickets);
}

int tickets_index() {
  static const int index = SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, &free_tickets);
  return index;
}

Tickets* tickets_of(SSL_CTX* ctx) {
  const int index = tickets_index();
  return index < 0 ? nullptr : static_cast<Tickets*>(SSL_CTX_get_ex_data(ctx, index));
}

// OpenSSL's new-session callback, on the thread reading the connection. It keeps a copy: the
// session it is given stays the connection's, and OpenSSL marks that one not resumable when the
// connection is freed without a close_notify sent (kinformer sends none). Nothing may throw
// through OpenSSL's frames.
int keep_ticket(SSL* ssl, SSL_SESSION* session) noexcept {
  Tickets* tickets = tickets_of(SSL_get_SSL_CTX(ssl));
  if (tickets == nullptr || SSL_SESSION_is_resumable(session) != 1) return 0;
  SSL_SESSION* copy = SSL_SESSION_dup(session);
  if (copy == nullptr) return 0;
  SSL_SESSION* dropped = nullptr;
  try {
    std::lock_guard lock(tickets->mu);
    tickets->kept.push_back(copy);
    if (tickets->kept.size() > kTicketsKept) {
      dropped = tickets->kept.front();
      tickets->kept.pop_front();
    }
  } catch (...) {
    dropped = copy;  // not kept
  }
  SSL_SESSION_free(dropped);
  return 0;  // the given session's reference stays OpenSSL's
}

// A resumed handshake does not look at the server's certificate again: a session whose
// certificate has expired is not offered (as Go's client does).
bool certificate_still_valid(SSL_SESSION* session) {
  X509* server = SSL_SESSION_get0_peer(session);
  return server == nullptr || X509_cmp_current_time(X509_get0_notAfter(server)) > 0;
}

// A kept session for a new connection (the caller frees it), or null. A TLS 1.3 ticket leaves the
// store: it is used once, and the new connection brings tickets of its own. A TLS 1.2 session
// stays, as a resumed 1.2 handshake brings none, and the connection gets a copy of it (OpenSSL
// marks the connection's session not resumable when it ends without close_notify).
SSL_SESSION* take_ticket(SSL_CTX* ctx) {
  Tickets* tickets = tickets_of(ctx);
  if (tickets == nullptr) return nullptr;
  std::lock_guard lock(tickets->mu);
  while (!tickets->kept.empty()) {
    SSL_SESSION* newest = tickets->kept.back();
    if (!certificate_still_valid(newest)) {
      tickets->kept.pop_back();
      SSL_SESSION_free(newest);
      continue;
    }
    if (SSL_SESSION_get_protocol_version(newest) >= TLS1_3_VERSION) {
      tickets->kept.pop_back();
      return newest;
    }
    return SSL_SESSION_dup(newest);
  }
  return nullptr;
}

}  // namespace

bool keep_session_tickets(SSL_CTX* ctx) {
  const int index = tickets_index();
  if (index < 0) return false;
  if (SSL_CTX_get_ex_data(ctx, index) == nullptr) {
    auto* tickets = new (std::nothrow) Tickets;
    if (tickets == nullptr) return false;
    if (SSL_CTX_set_ex_data(ctx, index, tickets) != 1) {
      delete tickets;
      return false;
    }
  }
  // The client cache mode is what makes OpenSSL call the callback; its own store stays unused.
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
  SSL_CTX_sess_set_new_cb(ctx, &keep_ticket);
  return true;
}

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
  if (SSL_SESSION* ticket = take_ticket(ctx.native_handle())) {
    SSL_set_session(ssl_, ticket);  // takes a reference of its own
    SSL_SESSION_free(ticket);
  }
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
