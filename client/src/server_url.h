#pragma once
// Private: the API server's URL, parsed once (scheme, host, port, path prefix).

#include <string>

namespace kinformer::client::detail {

struct ServerUrl {
  bool tls = true;
  std::string host;    ///< without brackets for IPv6
  std::string port;    ///< "443" / "80" when the URL has none
  std::string prefix;  ///< path prefix without trailing '/'

  /// The Host header: the host (bracketed if IPv6), with ":port" unless it is the scheme's default.
  [[nodiscard]] std::string host_header() const;
};

/// Parses "https://host[:port][/prefix]" (or http://). Throws ConfigError naming `server`, or,
/// for a URL with userinfo (user:password@host), one that says so without naming it.
ServerUrl parse_server(const std::string& server);

/// True when `host` is an IPv4 or IPv6 literal (verified as an IP address, not a DNS name).
bool is_ip(const std::string& host);

}  // namespace kinformer::client::detail
