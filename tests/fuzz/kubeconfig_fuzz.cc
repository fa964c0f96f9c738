// libFuzzer target: the kubeconfig loader on arbitrary file contents.
// Checked beyond "no crash": malformed input fails only with ConfigError (the documented error),
// whose message is not empty; nothing else escapes. The loader never runs exec plugins (they run
// on the first request), so fuzzed kubeconfigs start no process.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "kinformer/client/cluster_config.h"
#include "kinformer/client/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string path = "/tmp/kinformer-fuzz-kubeconfig-" + std::to_string(getpid());
  if (FILE* f = std::fopen(path.c_str(), "wb")) {
    std::fwrite(data, 1, size, f);
    std::fclose(f);
  } else {
    std::abort();
  }
  kinformer::client::KubeconfigOptions options;
  options.path = path;
  options.kubeconfig_env = "";
  try {
    auto config = kinformer::client::ClusterConfig::from_kubeconfig(options);
    if (config.server.empty()) std::abort();  // a loaded config always has a server
  } catch (const kinformer::client::ConfigError& e) {
    if (std::string(e.what()).empty()) std::abort();
  }
  return 0;
}
