#pragma once
// What every e2e suite needs: the cluster under test (KUBECONFIG), a namespace of its own, the
// server's open-watch counts, and — with the embedded launcher — fault commands.

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "kinformer/client/cluster_config.h"
#include "kinformer/client/dynamic_object.h"
#include "kinformer/client/rest_client.h"
#include "kinformer/informer/shared_informer.h"
#include "tcp_proxy.h"

namespace kinformer::e2e {

/// The admin configuration: KUBECONFIG's current context. Throws when KUBECONFIG is unset (the
/// README's test command sets it, starting the embedded API server when needed).
client::ClusterConfig admin_config();
/// The context named "restricted" (a user with no RBAC permissions), when KUBECONFIG has it.
/// With the embedded launcher it must exist: its absence throws (the test fails, never skips).
std::optional<client::ClusterConfig> restricted_config();

/// True when the cluster is the embedded launcher's (KINFORMER_E2E_DIR), so that the fault
/// commands below are available. Against kind they are not.
bool launcher_available();
/// Runs `e2e/launcher.sh COMMAND --dir $KINFORMER_E2E_DIR`; returns its exit status.
int launcher(const std::string& command);

/// Client options for the suites' own requests (create, patch, delete during churn): the default
/// 5 QPS would make them slow. The clients under test keep their defaults.
client::RestClientOptions fast_client_options();

/// `config` reaching its server through `proxy` (TLS still checks the server's own name).
client::ClusterConfig through(const TcpProxy& proxy, client::ClusterConfig config);

/// Creates a namespace with a unique name starting with `prefix` and returns its name.
std::string create_namespace(client::RestClient& client, const std::string& prefix);

/// The server's open WATCH requests for `resource` ("secrets", "pods",
/// "discovery.k8s.io/v1/endpointslices"), read from /metrics.
long server_watches(client::RestClient& client, const std::string& resource);

/// The whole file ("" when it cannot be read).
std::string slurp(const std::string& path);

/// Polls `condition` every 50 ms until it holds or `timeout` passes; returns its last value.
bool eventually(const std::function<bool()>& condition,
                std::chrono::milliseconds timeout = std::chrono::seconds(30));

/// Waits until the server's WATCH count for `resource` equals `expected` (it moves a little
/// after the client opened or closed the connection); returns the last count read.
long wait_for_server_watches(client::RestClient& client, const std::string& resource, long expected,
                             std::chrono::milliseconds timeout = std::chrono::seconds(30));

/// A DynamicObject for create(): `json` is the whole object; name and namespace are copied into
/// metadata as create() needs them.
std::shared_ptr<client::DynamicObject> object(const std::string& ns, const std::string& name,
                                              std::string json);

/// Resource types used by the suites (dynamic: they work whatever typed models exist).
const client::ResourceType& secrets();
const client::ResourceType& pods();
const client::ResourceType& endpoints();
const client::ResourceType& endpoint_slices();
const client::ResourceType& namespaces();

/// name -> resourceVersion of what an informer's store holds.
std::map<std::string, std::string> store_state(const informer::SharedInformer& inf);
/// name -> resourceVersion of what the server lists in `ns` (one "<error>" entry on failure).
std::map<std::string, std::string> server_state(client::RestClient& c,
                                                const client::ResourceType& t,
                                                const std::string& ns);

}  // namespace kinformer::e2e
