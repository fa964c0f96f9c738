#include <mutex>

#include "kinformer/client/cluster_config.h"

namespace kinformer::client {
namespace {

class StaticCredentials final : public CredentialsProvider {
 public:
  explicit StaticCredentials(Credentials c) : credentials_(std::move(c)) {}
  Result<Credentials> current() override { return credentials_; }

 private:
  const Credentials credentials_;
};

}  // namespace

CredentialsProviderPtr static_credentials(Credentials credentials) {
  return std::make_shared<StaticCredentials>(std::move(credentials));
}

}  // namespace kinformer::client
