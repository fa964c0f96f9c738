#include "server_url.h"

#include <string_view>

#include <boost/asio/ip/address.hpp>

#include "kinformer/client/error.h"

namespace kinformer::client::detail {
namespace {

// True when the URL may carry user:password@: any '@' before the query or fragment. A password
// may hold '/' ("admin:ab/cd@host"), so the authority cannot be told from the path; an API
// server's path never needs an '@', so refusing one there too fails closed.
bool has_userinfo(std::string_view s) {
  return s.substr(0, s.find_first_of("?#")).find('@') != std::string_view::npos;
}

}  // namespace

ServerUrl parse_server(const std::string& server) {
  // Before anything else: the other messages name the URL, and the client logs it on every line.
  if (has_userinfo(server)) {
    throw ConfigError("server URL must not carry credentials (user:password@)");
  }
  ServerUrl url;
  std::string_view s = server;
  if (s.starts_with("https://")) {
    s.remove_prefix(8);
  } else if (s.starts_with("http://")) {
    url.tls = false;
    s.remove_prefix(7);
  } else {
    throw ConfigError("server '" + server + "': expected an https:// or http:// URL");
  }
  auto slash = s.find('/');
  std::string_view authority = s.substr(0, slash);
  if (slash != std::string_view::npos) url.prefix = std::string(s.substr(slash));
  while (!url.prefix.empty() && url.prefix.back() == '/') url.prefix.pop_back();
  if (authority.starts_with('[')) {
    auto close = authority.find(']');
    if (close == std::string_view::npos) {
      throw ConfigError("server '" + server + "': unterminated IPv6 address");
    }
    url.host = std::string(authority.substr(1, close - 1));
    if (close + 1 < authority.size() && authority[close + 1] == ':') {
      url.port = authority.substr(close + 2);
    }
  } else {
    auto colon = authority.rfind(':');
    url.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) url.port = authority.substr(colon + 1);
  }
  if (url.host.empty()) throw ConfigError("server '" + server + "': missing host");
  if (url.port.empty()) url.port = url.tls ? "443" : "80";
  return url;
}

std::string ServerUrl::host_header() const {
  bool default_port = port == (tls ? "443" : "80");
  std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return default_port ? h : h + ":" + port;
}

bool is_ip(const std::string& host) {
  boost::system::error_code ec;
  boost::asio::ip::make_address(host, ec);
  return !ec;
}

}  // namespace kinformer::client::detail
