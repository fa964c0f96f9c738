#pragma once
// Credentials for API-server requests and where they come from: fixed, a token file re-read on
// rotation, or an exec plugin (client/src/credentials.cc).

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kinformer/client/result.h"

namespace kinformer::client {

/// The credentials to present on one request. Contains secrets: never log it.
struct Credentials {
  std::string token;            ///< bearer token; empty = none
  std::string client_cert_pem;  ///< client certificate (PEM, may hold a chain); empty = none
  std::string client_key_pem;   ///< private key for client_cert_pem (PEM)
  /// When the credentials stop being valid (exec plugins); unset = no known expiry.
  std::optional<std::chrono::system_clock::time_point> expiry;
};

/// Supplies the current credentials. The transport asks on every request (and on every new TLS
/// connection for the client certificate), so rotated tokens and certificates are picked up.
/// Thread-safety: implementations are thread-safe; current() may block (file read, exec plugin)
/// and is never called from the client's io thread.
class CredentialsProvider {
 public:
  virtual ~CredentialsProvider() = default;
  /// The credentials to use now; an Errc::auth error when they cannot be obtained.
  virtual Result<Credentials> current() = 0;
  /// The server answered 401 with the credentials last returned: drop cached credentials so the
  /// next current() obtains fresh ones (re-runs an exec plugin, re-reads a token file).
  /// RestClient then retries the request once, and only if the fresh credentials differ.
  virtual void invalidate() noexcept {}
};

using CredentialsProviderPtr = std::shared_ptr<CredentialsProvider>;

/// Fixed credentials.
CredentialsProviderPtr static_credentials(Credentials credentials);

/// A bearer token read from `path`, re-read whenever the file's modification time or size
/// changes (rotated service-account tokens), plus the fixed parts of `base` (client cert).
CredentialsProviderPtr token_file_credentials(std::string path, Credentials base = {});

/// An exec credential plugin (client.authentication.k8s.io/v1 or v1beta1).
struct ExecConfig {
  std::string api_version;  ///< "client.authentication.k8s.io/v1" or ".../v1beta1"
  std::string command;      ///< resolved like kubectl: relative paths with a '/' against the
                            ///< kubeconfig folder, bare names through PATH
  std::vector<std::string> args;
  /// Set in the plugin's environment on top of the inherited one: a name set here replaces the
  /// inherited value (a later entry wins over an earlier one), and KUBERNETES_EXEC_INFO is always
  /// the one kinformer sets. The plugin sees every name once.
  std::vector<std::pair<std::string, std::string>> env;
  /// For messages: e.g. "kubeconfig /x/config: user 'admin'".
  std::string origin;
  /// Deadline of one run, from start to exit (a plugin that prints its credential and keeps
  /// running counts as timed out). The plugin runs in a process group of its own, which is
  /// killed at the deadline; current() then fails with an Errc::auth error naming the command.
  std::chrono::seconds timeout{60};
};

/// Runs the plugin, caches its ExecCredential until status.expirationTimestamp (or until
/// invalidate(), e.g. after a 401) and runs it again then. `base` supplies a client certificate
/// the plugin does not return.
CredentialsProviderPtr exec_credentials(ExecConfig config, Credentials base = {});

}  // namespace kinformer::client
