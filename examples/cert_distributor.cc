// cert_distributor: what a mesh's certificate distributor starts from. It watches the
// kubernetes.io/tls Secrets of one namespace (a field selector, so the server filters) and
// prints "add|update|delete NAME (cert N bytes)" for each change. It prints sizes only: a
// Secret's key and certificate are secret and never reach the output or a log.
//
//   cert_distributor --namespace mesh [--exit-after-sync] [--max-events N]
//
// The cluster comes from ClusterConfig::load_default(): KUBECONFIG, in-cluster, ~/.kube/config.
// Without --exit-after-sync or --max-events it runs until killed (Ctrl-C).
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

#include "kinformer/client/cluster_config.h"
#include "kinformer/client/rest_client.h"
#include "kinformer/client/secret.h"
#include "kinformer/informer/informer_factory.h"

using namespace kinformer;

int main(int argc, char** argv) {
  std::string ns = "default";
  bool exit_after_sync = false;
  int max_events = 0;  // 0: run until killed
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--namespace" && i + 1 < argc)
      ns = argv[++i];
    else if (arg == "--max-events" && i + 1 < argc)
      max_events = std::stoi(argv[++i]);
    else if (arg == "--exit-after-sync")
      exit_after_sync = true;
    else
      return std::fprintf(stderr, "usage: %s --namespace NS [--exit-after-sync] [--max-events N]\n",
                          argv[0]),
             2;
  }
  try {
    auto rest = std::make_shared<client::RestClient>(client::ClusterConfig::load_default());
    informer::InformerFactory factory(rest);
    auto secrets = factory.informer<client::Secret>(
        {.namespace_ = ns, .field_selector = "type=kubernetes.io/tls"});

    std::mutex mu;
    std::condition_variable cv;
    int events = 0;
    auto print = [&](const char* what, const client::Secret& s) {
      const auto cert = s.data.find("tls.crt");
      std::printf("%s %s (cert %zu bytes)\n", what, s.metadata.name.c_str(),
                  cert ? cert->size() : 0);
      std::fflush(stdout);
      std::lock_guard lock(mu);
      ++events;
      cv.notify_all();
    };
    auto registration = secrets.add_handler({
        .add = [&](const auto& s, bool) { print("add", *s); },
        .update = [&](const auto&, const auto& s) { print("update", *s); },
        .del = [&](const auto& s, bool) { print("delete", *s); },
    });
    factory.start();
    if (!factory.wait_for_cache_sync(std::chrono::seconds(30))) {
      std::fprintf(stderr, "cert_distributor: the Secret cache did not sync within 30s\n");
      return 1;
    }
    if (exit_after_sync) {
      // The cache is synced; this handler has synced once it has seen every initial add.
      while (!registration.has_synced()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    } else {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return max_events > 0 && events >= max_events; });
    }
    registration.close();
    factory.shutdown();
  } catch (const std::exception& e) {  // ConfigError from load_default: it says what it tried
    std::fprintf(stderr, "cert_distributor: %s\n", e.what());
    return 1;
  }
  return 0;
}
