#pragma once
// Private: the transport's TLS: one SSL context per client certificate (CA bundle, verify mode,
// client certificate and key), and the server's verification on each new connection (SNI,
// host name or IP address check, handshake errors that say why).

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>

#include <boost/asio/ssl/context.hpp>

#include "kinformer/client/credentials.h"
#include "kinformer/client/result.h"
#include "net.h"
#include "server_url.h"
#include "tls_stream.h"

namespace kinformer::client::detail {

/// What verifying the server takes, from the ClusterConfig.
struct TlsSettings {
  bool enabled = true;  ///< false: plain HTTP (an http:// server), no context
  std::string ca_pem;   ///< empty: the system's default trust store
  bool insecure_skip_tls_verify = false;
  std::string verify_name;  ///< tls-server-name, else the URL's host
  bool verify_is_ip = false;
};

/// Thread-safe: context_for() may be called from any thread.
class TlsContexts {
 public:
  explicit TlsContexts(TlsSettings settings) : settings_(std::move(settings)) {}
  ~TlsContexts();
  TlsContexts(const TlsContexts&) = delete;
  TlsContexts& operator=(const TlsContexts&) = delete;

  /// The context for `credentials`' client certificate, cached while the certificate and key
  /// stay the same (compared in place: a request copies neither); `cert_id` names it (0: no
  /// client certificate). Null when TLS is off.
  Result<std::shared_ptr<ssl::context>> context_for(const Credentials& credentials,
                                                    std::size_t& cert_id);
  /// A fresh context: an Errc::tls error for an unparsable CA bundle, Errc::auth for a bad
  /// client certificate or key, or an encrypted key (OpenSSL never prompts for a passphrase);
  /// messages never quote them.
  [[nodiscard]] Result<std::shared_ptr<ssl::context>> make_context(
      const Credentials& credentials) const;
  [[nodiscard]] const TlsSettings& settings() const noexcept { return settings_; }

 private:
  const TlsSettings settings_;
  std::mutex mu_;
  std::size_t cert_id_ = 0;            // guarded by mu_
  std::size_t contexts_made_ = 0;      // guarded by mu_: the next cert_id_ with a certificate
  std::string cert_pem_;               // guarded by mu_: ctx_'s client certificate
  std::string key_pem_;                // guarded by mu_: and key, cleansed before it is freed
  std::shared_ptr<ssl::context> ctx_;  // guarded by mu_
};

/// Sets SNI and the name to verify on a connected TLS stream, then handshakes. A name OpenSSL
/// cannot check fails the connection (it would otherwise verify the chain only). Errors name
/// the verified name and `url`'s host and port. Runs on the io thread.
awaitable<Status> handshake(TlsStream& stream, const TlsSettings& settings, const ServerUrl& url);

}  // namespace kinformer::client::detail
