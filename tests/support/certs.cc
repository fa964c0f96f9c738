#include "certs.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>
#include <stdexcept>

namespace kinformer::testing {
namespace {

template <typename T, void (*F)(T*)>
struct Deleter {
  void operator()(T* p) const { F(p); }
};
using KeyPtr = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using CertPtr = std::unique_ptr<X509, Deleter<X509, X509_free>>;
using BioPtr = std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>>;

void check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string("test pki: ") + what + " failed");
}

KeyPtr new_key() {
  KeyPtr key(EVP_EC_gen("P-256"));
  check(key != nullptr, "EVP_EC_gen");
  return key;
}

std::string bio_string(BIO* bio) {
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<std::size_t>(n));
}

std::string key_pem(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  check(PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) == 1,
        "PEM_write_bio_PrivateKey");
  return bio_string(bio.get());
}

std::string cert_pem(X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  check(PEM_write_bio_X509(bio.get(), cert) == 1, "PEM_write_bio_X509");
  return bio_string(bio.get());
}

KeyPtr read_key(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  KeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  check(key != nullptr, "PEM_read_bio_PrivateKey");
  return key;
}

CertPtr read_cert(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  CertPtr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  check(cert != nullptr, "PEM_read_bio_X509");
  return cert;
}

void add_ext(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  check(ext != nullptr, "X509V3_EXT_conf_nid");
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
}

CertPtr new_cert(EVP_PKEY* key, const std::string& cn, bool expired) {
  CertPtr cert(X509_new());
  X509_set_version(cert.get(), 2);
  unsigned char serial[16];
  RAND_bytes(serial, sizeof serial);
  serial[0] &= 0x7f;
  BIGNUM* bn = BN_bin2bn(serial, sizeof serial, nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get()));
  BN_free(bn);
  const long day = 24 * 3600;
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), expired ? -2 * day : -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), expired ? -day : 365 * day);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  return cert;
}

}  // namespace

CertKey make_ca(const std::string& common_name) {
  KeyPtr key = new_key();
  CertPtr cert = new_cert(key.get(), common_name, false);
  X509_set_issuer_name(cert.get(), X509_get_subject_name(cert.get()));
  add_ext(cert.get(), cert.get(), NID_basic_constraints, "critical,CA:TRUE");
  add_ext(cert.get(), cert.get(), NID_key_usage, "critical,keyCertSign,cRLSign");
  add_ext(cert.get(), cert.get(), NID_subject_key_identifier, "hash");
  check(X509_sign(cert.get(), key.get(), EVP_sha256()) > 0, "X509_sign");
  return {cert_pem(cert.get()), key_pem(key.get())};
}

CertKey make_cert(const CertKey& ca, const CertOptions& options) {
  KeyPtr ca_key = read_key(ca.key_pem);
  CertPtr ca_cert = read_cert(ca.cert_pem);
  KeyPtr key = new_key();
  CertPtr cert = new_cert(key.get(), options.common_name, options.expired);
  X509_set_issuer_name(cert.get(), X509_get_subject_name(ca_cert.get()));
  add_ext(cert.get(), ca_cert.get(), NID_basic_constraints, "critical,CA:FALSE");
  add_ext(cert.get(), ca_cert.get(), NID_key_usage, "critical,digitalSignature,keyEncipherment");
  add_ext(cert.get(), ca_cert.get(), NID_ext_key_usage,
          options.server ? "serverAuth" : "clientAuth");
  add_ext(cert.get(), ca_cert.get(), NID_authority_key_identifier, "keyid:always");
  std::string san;
  for (const auto& d : options.dns_names) san += (san.empty() ? "" : ",") + ("DNS:" + d);
  for (const auto& ip : options.ip_addresses) san += (san.empty() ? "" : ",") + ("IP:" + ip);
  if (!san.empty()) add_ext(cert.get(), ca_cert.get(), NID_subject_alt_name, san);
  check(X509_sign(cert.get(), ca_key.get(), EVP_sha256()) > 0, "X509_sign");
  return {cert_pem(cert.get()), key_pem(key.get())};
}

Pki make_pki(const PkiOptions& options) {
  Pki pki;
  pki.ca = make_ca();
  CertOptions server;
  server.common_name = "kinformer-fake-apiserver";
  server.dns_names = options.server_dns_names;
  server.ip_addresses = options.server_ip_addresses;
  server.expired = options.server_expired;
  pki.server = make_cert(pki.ca, server);
  CertOptions client;
  client.common_name = "kinformer-client";
  client.server = false;
  pki.client = make_cert(pki.ca, client);
  return pki;
}

std::string encrypted_key_pem(const std::string& key_pem, const std::string& passphrase,
                              bool pkcs8) {
  BioPtr in(BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size())));
  KeyPtr key(PEM_read_bio_PrivateKey(in.get(), nullptr, nullptr, nullptr));
  check(key != nullptr, "PEM_read_bio_PrivateKey");
  BioPtr out(BIO_new(BIO_s_mem()));
  std::string pass = passphrase;  // OpenSSL takes it as unsigned char*, not const
  auto* kstr = reinterpret_cast<unsigned char*>(pass.data());
  const int klen = static_cast<int>(pass.size());
  const bool written =
      pkcs8 ? PEM_write_bio_PKCS8PrivateKey(out.get(), key.get(), EVP_aes_256_cbc(), pass.data(),
                                            klen, nullptr, nullptr) == 1
            : PEM_write_bio_PrivateKey_traditional(out.get(), key.get(), EVP_aes_256_cbc(), kstr,
                                                   klen, nullptr, nullptr) == 1;
  check(written, "writing an encrypted key");
  return bio_string(out.get());
}

}  // namespace kinformer::testing
