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

/// The response's header fields, in order.
std::vector<std::pair<std::string, std::string>> copy_headers(const http::fields& fields);

}  // namespace kinformer::client::detail
