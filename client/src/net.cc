#include "net.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

namespace kinformer::client::detail {

bool set_tcp_liveness(int fd) {
  const int on = 1;
  const int idle = kKeepAliveIdleSeconds;
  const int interval = kKeepAliveIntervalSeconds;
  const int probes = kKeepAliveProbes;
  const unsigned int user_timeout = kUserTimeoutMilliseconds;
  // Each on its own: one that fails does not keep the others from being set.
  bool ok = setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on) == 0;
  ok = setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle) == 0 && ok;
  ok = setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval) == 0 && ok;
  ok = setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof probes) == 0 && ok;
  ok = setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof user_timeout) == 0 && ok;
  return ok;
}

Error from_ec(const error_code& ec, const std::string& what) {
  Errc code = Errc::network;
  if (ec == beast::error::timeout) {
    code = Errc::timeout;
  } else if (ec == asio::error::operation_aborted) {
    code = Errc::cancelled;
  } else if (ec.category() == asio::error::get_ssl_category() ||
             ec == ssl::error::stream_truncated) {
    code = Errc::tls;
  } else if (ec == http::error::body_limit) {
    code = Errc::too_large;
  }
  return Error::make(code, what + ": " + ec.message());
}

std::vector<std::pair<std::string, std::string>> copy_headers(const http::fields& fields) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& f : fields) {
    out.emplace_back(std::string(f.name_string()), std::string(f.value()));
  }
  return out;
}

}  // namespace kinformer::client::detail
