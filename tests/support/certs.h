#pragma once
// In-memory test PKI: a CA, server and client certificates as PEM strings (OpenSSL, P-256).

#include <string>
#include <vector>

namespace kinformer::testing {

/// A certificate and its private key, PEM encoded.
struct CertKey {
  std::string cert_pem;
  std::string key_pem;
};

/// What to put in a leaf certificate.
struct CertOptions {
  std::string common_name = "kinformer-test";
  std::vector<std::string> dns_names;     ///< subjectAltName DNS entries
  std::vector<std::string> ip_addresses;  ///< subjectAltName IP entries
  bool server = true;                     ///< extendedKeyUsage serverAuth (else clientAuth)
  bool expired = false;                   ///< valid from 2 days ago until 1 day ago
};

/// A self-signed CA certificate.
CertKey make_ca(const std::string& common_name = "kinformer-test-ca");
/// A leaf certificate signed by `ca`.
CertKey make_cert(const CertKey& ca, const CertOptions& options);

/// A CA, a server certificate for localhost/127.0.0.1 (unless overridden) and a client
/// certificate (CN "kinformer-client"), all signed by the CA.
struct Pki {
  CertKey ca;
  CertKey server;
  CertKey client;
};

/// Options for make_pki.
struct PkiOptions {
  std::vector<std::string> server_dns_names = {"localhost"};
  std::vector<std::string> server_ip_addresses = {"127.0.0.1"};
  bool server_expired = false;
};
Pki make_pki(const PkiOptions& options = {});

/// `key_pem` encrypted (AES-256-CBC) with `passphrase`: PKCS#8 ("ENCRYPTED PRIVATE KEY"), or
/// the traditional form with Proc-Type and DEK-Info headers (what `openssl ec -aes256` writes).
std::string encrypted_key_pem(const std::string& key_pem, const std::string& passphrase,
                              bool pkcs8 = true);

}  // namespace kinformer::testing
