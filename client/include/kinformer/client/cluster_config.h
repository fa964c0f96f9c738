#pragma once
// Where an API server is and how to authenticate to it: kubeconfig (kubectl's rules) or in-cluster.

#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "kinformer/client/credentials.h"  // the credentials API, declared beside credentials.cc
#include "kinformer/client/error.h"
#include "kinformer/client/result.h"

namespace kinformer::client {

/// Options for ClusterConfig::from_kubeconfig and ClusterConfig::load_default.
struct KubeconfigOptions {
  /// An explicit kubeconfig file (kubectl --kubeconfig). Unset: the KUBECONFIG variable
  /// (':'-separated files, merged) or ~/.kube/config.
  std::optional<std::string> path;
  /// The context to use (kubectl --context). Unset: current-context.
  std::optional<std::string> context;
  /// Overrides the KUBECONFIG environment variable (tests). Unset: read the environment.
  std::optional<std::string> kubeconfig_env;
};

/// What a kubeconfig from untrusted input (a Secret written by anyone allowed to write Secrets
/// in a namespace) may use. The default refuses everything that reaches the local machine or
/// sends the credentials unprotected: only inline `*-data` fields, `token`, an https:// `server`
/// and `tls-server-name` are accepted.
struct KubeconfigPolicy {
  bool allow_exec = false;           ///< users[].user.exec: runs a program here
  bool allow_auth_provider = false;  ///< users[].user.auth-provider (unsupported even if allowed)
  bool allow_token_file = false;     ///< users[].user.tokenFile: reads a local file
  /// certificate-authority, client-certificate, client-key: read local files.
  bool allow_file_paths = false;
  /// An http:// server or insecure-skip-tls-verify: the credentials would reach whoever
  /// answers.
  bool allow_insecure = false;
  /// Every field allowed: what a kubeconfig file of one's own may use.
  static KubeconfigPolicy allow_all() { return {true, true, true, true, true}; }
};

/// A kubeconfig field refused by KubeconfigPolicy. field(): the kubeconfig field ("exec",
/// "tokenFile", "certificate-authority", ...); the message names the origin, the entry and the
/// field, never a value.
class KubeconfigRefused : public ConfigError {
 public:
  KubeconfigRefused(const std::string& message, std::string field)
      : ConfigError(message), field_(std::move(field)) {}
  [[nodiscard]] const std::string& field() const noexcept { return field_; }

 private:
  std::string field_;
};

/// Options for ClusterConfig::from_kubeconfig_data.
struct KubeconfigDataOptions {
  /// Names the source in messages, e.g. "secret istio-system/remotes, key 'west'".
  std::string origin = "kubeconfig data";
  /// The context to use. Unset: current-context.
  std::optional<std::string> context;
  /// Default: inline data only (the untrusted case). Relative file paths, when allowed,
  /// resolve against the current directory.
  KubeconfigPolicy policy;
};

/// Options for ClusterConfig::in_cluster.
struct InClusterOptions {
  /// Folder with token, ca.crt and namespace.
  std::string service_account_dir = "/var/run/secrets/kubernetes.io/serviceaccount";
  /// Override KUBERNETES_SERVICE_HOST / KUBERNETES_SERVICE_PORT (tests). Unset: environment.
  std::optional<std::string> host;
  std::optional<std::string> port;
};

/// How to reach and authenticate to one API server. Value type; copies share the credentials
/// provider. Thread-safety: immutable once built; the provider is thread-safe.
struct ClusterConfig {
  /// "https://host:port" (or "http://..." for plain HTTP, tests only).
  std::string server;
  /// PEM CA bundle used to verify the server; empty = the system's default trust store.
  std::string ca_pem;
  /// Skip server certificate verification (kubeconfig insecure-skip-tls-verify). Never default.
  bool insecure_skip_tls_verify = false;
  /// The name to verify the server certificate against (and send as SNI) instead of the host
  /// of `server`.
  std::string tls_server_name;
  /// Null: anonymous requests.
  CredentialsProviderPtr credentials;
  /// The context used (kubeconfig) or "in-cluster": for messages and metrics labels.
  std::string context;
  /// The namespace from the context or the service account, if any.
  std::string namespace_;

  /// Loads a kubeconfig like kubectl. Throws ConfigError naming file, entry and field for any
  /// malformed or inconsistent input; never includes secret values in the message.
  static ClusterConfig from_kubeconfig(const KubeconfigOptions& options = {});
  /// Loads a kubeconfig held in memory (e.g. a Secret's value), with kubectl's rules for one
  /// file. Throws KubeconfigRefused for a field options.policy refuses (checked before anything
  /// is read or run), ConfigError for any other problem; messages start with options.origin.
  static ClusterConfig from_kubeconfig_data(std::string_view yaml,
                                            const KubeconfigDataOptions& options = {});
  /// The in-cluster configuration of a pod. Throws ConfigError when not running in a cluster.
  static ClusterConfig in_cluster(const InClusterOptions& options = {});
  /// What kubectl and controller-runtime do, first match wins:
  ///  1. options.path (an explicit --kubeconfig);
  ///  2. KUBECONFIG (options.kubeconfig_env in tests) when set and not empty;
  ///  3. in-cluster, when running in a Pod: KUBERNETES_SERVICE_HOST and _PORT are set and the
  ///     service-account token file exists (`in_cluster` names the folder, tests);
  ///  4. ~/.kube/config.
  /// A source that is chosen and then fails (a malformed file, a Pod without ca.crt) throws its
  /// own ConfigError: there is no silent fall-through to another cluster. When no source
  /// applies, the ConfigError lists each one tried and why it did not apply. Messages never
  /// contain a token or key.
  static ClusterConfig load_default(const KubeconfigOptions& options = {},
                                    const InClusterOptions& in_cluster = {});
};

}  // namespace kinformer::client
