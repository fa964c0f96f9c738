#pragma once
// Private: what the transport's files share about Asio and Beast (namespace aliases, the
// as_tuple completion token, error mapping). Included only by client/src/*.cc.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "kinformer/client/error.h"

namespace kinformer::client::detail {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using asio::awaitable;
using beast::error_code;
inline constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);

/// An Asio/Beast/OpenSSL error as a kinformer Error: timeout, cancelled, tls, too_large (body
/// limit) or network, with `what` and the error's message.
Error from_ec(const error_code& ec, const std::string& what);

/// TCP liveness of every connection to an API server: keepalive probes after kKeepAliveIdle of
/// silence, every kKeepAliveInterval, kKeepAliveProbes of them; and TCP_USER_TIMEOUT, the
/// longest data may stay unacknowledged. A path that drops every packet is then closed by the
/// kernel within 60 s, idle or not. (A proxy that still ACKs defeats both: the watch's read-idle
/// deadline covers that.)
inline constexpr int kKeepAliveIdleSeconds = 30;
inline constexpr int kKeepAliveIntervalSeconds = 10;
inline constexpr int kKeepAliveProbes = 3;
inline constexpr int kUserTimeoutMilliseconds = 60'000;
/// Sets the options above on a connected TCP socket; false (errno set) if one could not be set.
bool set_tcp_liveness(int fd);

/// The response's header fields, in order.
std::vector<std::pair<std::string, std::string>> copy_headers(const http::fields& fields);

}  // namespace kinformer::client::detail
