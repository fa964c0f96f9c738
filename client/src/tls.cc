#include "tls.h"

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <functional>

namespace kinformer::client::detail {

Result<std::shared_ptr<ssl::context>> TlsContexts::context_for(const Credentials& credentials,
                                                               std::size_t& cert_id) {
  if (!settings_.enabled) return std::shared_ptr<ssl::context>();
  cert_id = credentials.client_cert_pem.empty()
                ? 0
                : std::hash<std::string>()(credentials.client_cert_pem + "\n" +
                                           credentials.client_key_pem);
  std::lock_guard lock(mu_);
  if (ctx_ && cert_id_ == cert_id) return ctx_;
  auto made = make_context(credentials);
  if (!made) return made;
  ctx_ = made.value();
  cert_id_ = cert_id;
  return ctx_;
}

Result<std::shared_ptr<ssl::context>> TlsContexts::make_context(
    const Credentials& credentials) const {
  auto c = std::make_shared<ssl::context>(ssl::context::tls_client);
  SSL_CTX_set_min_proto_version(c->native_handle(), TLS1_2_VERSION);
  error_code ec;
  if (settings_.insecure_skip_tls_verify) {
    c->set_verify_mode(ssl::verify_none);
  } else {
    c->set_verify_mode(ssl::verify_peer);
    if (!settings_.ca_pem.empty()) {
      c->add_certificate_authority(asio::buffer(settings_.ca_pem), ec);
      if (ec) {
        return Error::make(Errc::tls, "certificate-authority: not a valid PEM certificate bundle");
      }
    } else {
      c->set_default_verify_paths(ec);
    }
  }
  if (!credentials.client_cert_pem.empty()) {
    c->use_certificate_chain(asio::buffer(credentials.client_cert_pem), ec);
    if (ec) return Error::make(Errc::auth, "client certificate: not a valid PEM certificate");
    c->use_private_key(asio::buffer(credentials.client_key_pem), ssl::context::pem, ec);
    if (ec) {
      return Error::make(Errc::auth,
                         "client key: not a valid PEM private key matching the certificate");
    }
  }
  return c;
}

awaitable<Status> handshake(beast::ssl_stream<beast::tcp_stream>& stream,
                            const TlsSettings& settings, const ServerUrl& url) {
  const std::string& verify_name = settings.verify_name;
  const bool verify_is_ip = settings.verify_is_ip;
  SSL* ssl = stream.native_handle();
  if (!verify_is_ip) SSL_set_tlsext_host_name(ssl, verify_name.c_str());
  if (!settings.insecure_skip_tls_verify) {
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
    X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    // OpenSSL refuses some names (a scoped IPv6 literal such as fe80::1%eth0, a name with a
    // NUL); going on would verify the chain only, so such a name fails the connection.
    int set = verify_is_ip
                  ? X509_VERIFY_PARAM_set1_ip_asc(param, verify_name.c_str())
                  : X509_VERIFY_PARAM_set1_host(param, verify_name.c_str(), verify_name.size());
    if (set != 1) {
      co_return Error::make(Errc::tls, "TLS server name '" + verify_name + "' (" + url.host + ":" +
                                           url.port +
                                           "): OpenSSL cannot check a certificate against this " +
                                           (verify_is_ip ? "IP address" : "host name"));
    }
  }
  auto [hec] = co_await stream.async_handshake(ssl::stream_base::client, kTuple);
  if (hec) {
    long verify = SSL_get_verify_result(ssl);
    std::string what =
        "TLS handshake with " + verify_name + " (" + url.host + ":" + url.port + ") failed";
    if (verify != X509_V_OK) {
      co_return Error::make(Errc::tls, what + ": certificate verify failed: " +
                                           X509_verify_cert_error_string(verify));
    }
    Error e = from_ec(hec, what);
    if (e.code != Errc::timeout && e.code != Errc::cancelled) e.code = Errc::tls;
    co_return e;
  }
  co_return Ok{};
}

}  // namespace kinformer::client::detail
