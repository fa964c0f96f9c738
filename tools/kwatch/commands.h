#pragma once
// kwatch's subcommands against a cluster. Each returns the process exit status (cli.h).

#include <csignal>
#include <mutex>
#include <string>

#include "cli.h"
#include "kinformer/client/cluster_config.h"
#include "kinformer/client/error.h"
#include "kinformer/client/rest_client.h"

namespace kinformer::tools {

/// The cluster of --kubeconfig/--context (else KUBECONFIG's current context). Throws
/// client::ConfigError with a message naming the file and field.
client::ClusterConfig load_config(const CommonOptions& common);

/// The signals kwatch waits for synchronously (SIGINT, SIGTERM, SIGUSR1).
sigset_t kwatch_signals();
/// Blocks kwatch_signals() in the calling thread. main() calls it before any thread starts, so
/// every thread inherits the mask and the signals are only ever taken by sigtimedwait() in the
/// main thread: no work runs in a signal handler.
void block_kwatch_signals();

/// Serialises whole lines written to stdout by handler threads and the main thread.
std::mutex& stdout_mutex();

int run_audit(const AuditOptions& options);
int run_cache(const CacheOptions& options);
int run_demo(const DemoOptions& options);
int run_clusters(const ClustersOptions& options);
int run_endpoints(const EndpointsOptions& options);

}  // namespace kinformer::tools
