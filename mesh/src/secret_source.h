#pragma once
// SecretSource: the remote kubeconfig Secrets as the Secret informer's handler last saw them,
// turned into the clusters wanted now (one per data key: the key is the cluster ID, the value
// its kubeconfig).

#include <map>
#include <set>
#include <string>

#include "kinformer/client/log.h"
#include "kinformer/client/secret.h"

namespace kinformer::mesh::detail {

/// What one remote cluster is built from.
struct WantedCluster {
  std::string secret;  ///< "namespace/name" of the Secret holding the kubeconfig
  std::string kubeconfig;
};

/// Not thread-safe: the registry calls it under its lock.
class SecretSource {
 public:
  SecretSource(std::string local_cluster_id, client::Logger log);

  /// A Secret added or changed (`deleted` false), or deleted.
  void on_secret(const client::Secret& secret, bool deleted);
  /// Cluster ID -> what to build it from. An ID held by two Secrets goes to the first by
  /// namespace/name; an ID equal to the local cluster's is ignored. Each ignored (ID, Secret)
  /// pair is logged once, when it starts being ignored.
  [[nodiscard]] std::map<std::string, WantedCluster> wanted();

 private:
  const std::string local_id_;
  const client::Logger log_;
  // Secret key -> cluster ID -> kubeconfig.
  std::map<std::string, std::map<std::string, std::string>> secrets_;
  std::set<std::string> ignored_;  // "id\nsecret" pairs ignored at the last wanted()
};

}  // namespace kinformer::mesh::detail
