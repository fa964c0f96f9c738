#pragma once
// kwatch's command line: subcommands, their options, exit codes and structured stderr logging.
// Parsing is pure (no I/O) so that tests can check every usage error.

#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "kinformer/client/error.h"

namespace kinformer::tools {

/// Exit statuses scripts can rely on.
inline constexpr int kExitOk = 0;
/// A check failed: --max-watches exceeded, caches did not converge, watches multiplied.
inline constexpr int kExitCheckFailed = 1;
/// Usage, configuration, connection or permission error.
inline constexpr int kExitError = 2;

/// A command-line mistake; the message says what was wrong and main() adds the usage hint.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Flags every subcommand takes.
struct CommonOptions {
  std::optional<std::string> kubeconfig;  ///< --kubeconfig F (else KUBECONFIG, ~/.kube/config)
  std::optional<std::string> context;     ///< --context C (else current-context)
};

/// `kwatch help` / `--help` / `-h`.
struct HelpCommand {
  std::string topic;  ///< subcommand name, or "" for the overview
};

/// `kwatch audit`.
struct AuditOptions {
  CommonOptions common;
  std::optional<long> max_watches;  ///< --max-watches N (N >= 0)
  bool json = false;                ///< --json
};

/// `kwatch cache`.
struct CacheOptions {
  CommonOptions common;
  std::string resource;  ///< --resource (required): alias or group/version/resource
  std::string namespace_;
  std::string label_selector;
  std::string field_selector;
  bool until_synced = false;
  /// --dump FILE ("-" = stdout). Unset: stdout when --events is not given, else no dump.
  std::optional<std::string> dump;
  bool events = false;
  bool show_secret_data = false;
  int timeout_seconds = 60;  ///< how long to wait for the initial sync
  /// --watch-idle-timeout: FactoryOptions::reflector.watch_idle_timeout (unset: the
  /// library's, 75 s).
  std::optional<int> watch_idle_timeout_seconds;
};

/// `kwatch demo`.
struct DemoOptions {
  CommonOptions common;
  int components = 20;
  bool unshared = false;
  int duration_seconds = 20;
  std::string namespace_;   ///< empty: create kinformer-demo-<random>
  int ops_per_second = 20;  ///< --rate: churn operations per second
};

/// What `clusters` and `endpoints` share: where the remote kubeconfig Secrets are.
struct RegistryFlags {
  std::string secret_namespace = "kinformer-system";               ///< --secret-namespace
  std::string secret_selector = "kinformer.io/multicluster=true";  ///< --secret-selector
  std::string local_id = "local";                                  ///< --local-id
  int timeout_seconds = 30;  ///< --timeout: sync wait (start, each remote's sync timeout)
};

/// `kwatch clusters`.
struct ClustersOptions {
  CommonOptions common;
  RegistryFlags registry;
  bool json = false;
};

/// `kwatch endpoints SERVICE -n NS`.
struct EndpointsOptions {
  CommonOptions common;
  RegistryFlags registry;
  std::string service;     ///< positional (required)
  std::string namespace_;  ///< -n (required)
  std::string port;        ///< --port NAME ("" = the unnamed port)
  std::string subset;      ///< --subset k=v,... (a label selector over Pod labels)
  bool watch = false;
  bool json = false;
};

using Command = std::variant<HelpCommand, AuditOptions, CacheOptions, DemoOptions, ClustersOptions,
                             EndpointsOptions>;

/// Parses argv[1..] (the program name excluded). Throws UsageError naming the offending argument.
Command parse_args(const std::vector<std::string>& args);

/// One sentence for a failed request: unreachable server, TLS error, permission denied (with the
/// server's message) ...
std::string describe_error(const client::Error& error, const std::string& server);

/// The help text for `topic` ("" = overview).
std::string usage(const std::string& topic = {});

/// Structured log line to `out`: "kwatch level=LEVEL msg="..." k=v ...". Values with spaces or
/// quotes are quoted. Never pass a token, key or Secret data.
struct LogField {
  std::string key;
  std::string value;
};
void log_line(std::ostream& out, const std::string& level, const std::string& msg,
              const std::vector<LogField>& fields = {});
/// log_line to std::cerr (serialised across threads).
void log(const std::string& level, const std::string& msg,
         const std::vector<LogField>& fields = {});

}  // namespace kinformer::tools
