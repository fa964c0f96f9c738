#include "secret_source.h"

#include <utility>

namespace kinformer::mesh::detail {

SecretSource::SecretSource(std::string local_cluster_id, client::Logger log)
    : local_id_(std::move(local_cluster_id)), log_(std::move(log)) {}

void SecretSource::on_secret(const client::Secret& secret, bool deleted) {
  std::map<std::string, std::string> ids;
  if (!deleted) {
    for (const auto& [key, value] : secret.data) ids.emplace(key, value);
  }
  if (ids.empty()) {
    secrets_.erase(secret.key());
  } else {
    secrets_[secret.key()] = std::move(ids);
  }
}

std::map<std::string, WantedCluster> SecretSource::wanted() {
  std::map<std::string, WantedCluster> out;
  std::set<std::string> ignored;
  for (const auto& [secret, ids] : secrets_) {
    for (const auto& [id, kubeconfig] : ids) {
      std::string pair = id;
      pair += '\n';
      pair += secret;
      if (id == local_id_) {
        if (ignored.insert(pair).second && !ignored_.contains(pair)) {
          log_.warn("ignoring a remote kubeconfig named like the local cluster",
                    {{"cluster", id}, {"secret", secret}});
        }
        continue;
      }
      auto [it, inserted] = out.try_emplace(id, WantedCluster{secret, kubeconfig});
      if (!inserted && ignored.insert(pair).second && !ignored_.contains(pair)) {
        log_.warn("ignoring a cluster ID held by two Secrets",
                  {{"cluster", id}, {"secret", secret}, {"kept", it->second.secret}});
      }
    }
  }
  ignored_ = std::move(ignored);
  return out;
}

}  // namespace kinformer::mesh::detail
