#include "tls.h"

#include <openssl/crypto.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

namespace kinformer::client::detail {
namespace {

// OpenSSL's default passphrase callback prompts on the terminal (and would wait there while
// context_for() holds its mutex). This one declines at once and notes that it was asked: the key
// is encrypted. -1, not 0: 0 would be tried as an empty passphrase.
int refuse_passphrase(char* /*buf*/, int /*size*/, int /*rwflag*/, void* asked) {
  if (asked != nullptr) *static_cast<bool*>(asked) = true;
  return -1;
}

void cleanse(std::string& secret) {
  if (!secret.empty()) OPENSSL_cleanse(secret.data(), secret.size());
  secret.clear();
}

}  // namespace

TlsContexts::~TlsContexts() { cleanse(key_pem_); }

Result<std::shared_ptr<ssl::context>> TlsContexts::context_for(const Credentials& credentials,
                                                               std::size_t& cert_id) {
  if (!settings_.enabled) return std::shared_ptr<ssl::context>();
  std::lock_guard lock(mu_);
  if (!ctx_ || cert_pem_ != credentials.client_cert_pem || key_pem_ != credentials.client_key_pem) {
    auto made = make_context(credentials);
    if (!made) return made;
    ctx_ = made.value();
    cert_pem_ = credentials.client_cert_pem;
    cleanse(key_pem_);
    key_pem_ = credentials.client_key_pem;
    cert_id_ = credentials.client_cert_pem.empty() ? 0 : ++contexts_made_;
  }
  cert_id = cert_id_;
  return ctx_;
}

Result<std::shared_ptr<ssl::context>> TlsContexts::make_context(
    const Credentials& credentials) const {
  auto c = std::make_shared<ssl::context>(ssl::context::tls_client);
  SSL_CTX_set_min_proto_version(c->native_handle(), TLS1_2_VERSION);
  // OpenSSL frees a connection's record buffers while it has nothing to read or write (a quiet
  // watch, most of the time); TlsStream keeps none of its own.
  SSL_CTX_set_mode(c->native_handle(), SSL_MODE_RELEASE_BUFFERS);
  // A TLS 1.2 renegotiation would make a read write while an HTTP/2 write may be waiting, which
  // OpenSSL refuses (tls_stream.h); no API server asks for one.
  SSL_CTX_set_options(c->native_handle(), SSL_OP_NO_RENEGOTIATION);
  SSL_CTX_set_default_passwd_cb(c->native_handle(), refuse_passphrase);
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
    // The callback's argument only for this call: Asio's context deletes a user data pointer it
    // finds at destruction as its own password callback.
    bool asked_for_passphrase = false;
    SSL_CTX_set_default_passwd_cb_userdata(c->native_handle(), &asked_for_passphrase);
    c->use_private_key(asio::buffer(credentials.client_key_pem), ssl::context::pem, ec);
    SSL_CTX_set_default_passwd_cb_userdata(c->native_handle(), nullptr);
    if (ec && asked_for_passphrase) {
      return Error::make(Errc::auth,
                         "client key is encrypted; kinformer does not prompt for a passphrase");
    }
    if (ec) {
      return Error::make(Errc::auth,
                         "client key: not a valid PEM private key matching the certificate");
    }
  }
  return c;
}

awaitable<Status> handshake(TlsStream& stream, const TlsSettings& settings, const ServerUrl& url) {
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
  auto [hec, unused] = co_await stream.async_handshake(kTuple);
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
