#pragma once
// TcpProxy: a loopback TCP forwarder between a client under test and a real API server, so a
// test can cut the client off (every connection closed, new ones refused) while the server keeps
// running for everyone else, then heal the link. TLS passes through untouched.

#include <cstdint>
#include <memory>
#include <string>

namespace kinformer::e2e {

/// Thread-safety: every member may be called from any thread. Lifetime: the destructor closes
/// every connection and joins the proxy's thread.
class TcpProxy {
 public:
  /// Forwards 127.0.0.1:<port()> to upstream_host:upstream_port.
  TcpProxy(std::string upstream_host, std::uint16_t upstream_port);
  ~TcpProxy();
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  [[nodiscard]] std::uint16_t port() const;
  /// Closes every open connection and refuses new ones (accepted, then closed at once).
  void cut();
  /// Forwards new connections again.
  void heal();
  /// Connections forwarded so far.
  [[nodiscard]] std::uint64_t connections() const;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace kinformer::e2e
