// kwatch: audit an API server's open watches, inspect an informer cache, demo shared informers,
// show remote clusters (ClusterRegistry) and a service's endpoints across them (EndpointIndex).
// Logs go to stderr (key=value), results to stdout. Exit: 0 ok, 1 check failed, 2 error.

#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "cli.h"
#include "commands.h"
#include "kinformer/client/error.h"

int main(int argc, char** argv) {
  using namespace kinformer::tools;
  // Before any thread exists: signals are taken synchronously by the main thread only.
  block_kwatch_signals();
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    const Command command = parse_args(args);
    if (const auto* help = std::get_if<HelpCommand>(&command)) {
      std::cout << usage(help->topic);
      return kExitOk;
    }
    if (const auto* audit = std::get_if<AuditOptions>(&command)) return run_audit(*audit);
    if (const auto* cache = std::get_if<CacheOptions>(&command)) return run_cache(*cache);
    if (const auto* clusters = std::get_if<ClustersOptions>(&command))
      return run_clusters(*clusters);
    if (const auto* endpoints = std::get_if<EndpointsOptions>(&command))
      return run_endpoints(*endpoints);
    return run_demo(std::get<DemoOptions>(command));
  } catch (const UsageError& e) {
    log("error", e.what());
    std::cerr << "Run 'kwatch help' for usage.\n";
    return kExitError;
  } catch (const kinformer::client::ConfigError& e) {
    log("error", e.what());
    return kExitError;
  } catch (const std::exception& e) {
    log("error", e.what());
    return kExitError;
  }
}
