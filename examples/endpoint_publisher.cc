// endpoint_publisher: what a mesh's endpoint publisher starts from. It watches the
// EndpointSlices of one Service (label kubernetes.io/service-name=NAME, filtered by the server)
// and, on every change, prints the Service's whole endpoint set: one "ADDRESS ready=BOOL
// port=N" line per endpoint and port, or "(no endpoints)" when the set is empty.
//
//   endpoint_publisher --namespace mesh --service web [--exit-after-sync] [--max-events N]
//
// The cluster comes from ClusterConfig::load_default(): KUBECONFIG, in-cluster, ~/.kube/config.
// Without --exit-after-sync or --max-events it runs until killed (Ctrl-C).
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "kinformer/client/cluster_config.h"
#include "kinformer/client/endpoint_slice.h"
#include "kinformer/client/rest_client.h"
#include "kinformer/informer/informer_factory.h"

using namespace kinformer;
using SlicePtr = std::shared_ptr<const client::EndpointSlice>;

int main(int argc, char** argv) {
  std::string ns = "default", service;
  bool exit_after_sync = false;
  int max_events = 0;  // 0: run until killed
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--namespace" && i + 1 < argc)
      ns = argv[++i];
    else if (arg == "--service" && i + 1 < argc)
      service = argv[++i];
    else if (arg == "--max-events" && i + 1 < argc)
      max_events = std::stoi(argv[++i]);
    else if (arg == "--exit-after-sync")
      exit_after_sync = true;
    else
      service.clear(), i = argc;
  }
  if (service.empty()) {
    std::fprintf(stderr,
                 "usage: %s --namespace NS --service NAME [--exit-after-sync] [--max-events N]\n",
                 argv[0]);
    return 2;
  }
  try {
    auto rest = std::make_shared<client::RestClient>(client::ClusterConfig::load_default());
    informer::InformerFactory factory(rest);
    auto slices = factory.informer<client::EndpointSlice>(
        {.namespace_ = ns, .label_selector = "kubernetes.io/service-name=" + service});

    std::mutex mu;
    std::condition_variable cv;
    int events = 0;
    std::map<std::string, SlicePtr>
        by_name;  // the Service's slices; calls to one handler never overlap
    auto publish = [&] {
      std::string out;
      for (const auto& [name, slice] : by_name) {
        for (const auto& e : slice->endpoints) {
          for (const auto& p : slice->ports) {
            out += "  " + std::string(e.addresses.empty() ? "?" : e.addresses.front()) +
                   " ready=" + (e.ready.value_or(true) ? "true" : "false") +
                   " port=" + (p.port ? std::to_string(*p.port) : "all") + "\n";
          }
        }
      }
      std::printf("%s/%s:\n%s", ns.c_str(), service.c_str(),
                  out.empty() ? "  (no endpoints)\n" : out.c_str());
      std::fflush(stdout);
      std::lock_guard lock(mu);
      ++events;
      cv.notify_all();
    };
    auto registration = slices.add_handler({
        .add =
            [&](const SlicePtr& s, bool) {
              by_name[s->metadata.name] = s;
              publish();
            },
        .update =
            [&](const SlicePtr&, const SlicePtr& s) {
              by_name[s->metadata.name] = s;
              publish();
            },
        .del =
            [&](const SlicePtr& s, bool) {
              by_name.erase(s->metadata.name);
              publish();
            },
    });
    factory.start();
    if (!factory.wait_for_cache_sync(std::chrono::seconds(30))) {
      std::fprintf(stderr, "endpoint_publisher: the EndpointSlice cache did not sync within 30s\n");
      return 1;
    }
    // The cache is synced; this handler has synced once it has seen every initial add.
    while (!registration.has_synced()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::unique_lock lock(mu);
    if (events == 0)
      std::printf("%s/%s:\n  (no endpoints)\n", ns.c_str(), service.c_str()), std::fflush(stdout);
    if (!exit_after_sync) cv.wait(lock, [&] { return max_events > 0 && events >= max_events; });
    lock.unlock();
    registration.close();
    factory.shutdown();
  } catch (const std::exception& e) {  // ConfigError from load_default: it says what it tried
    std::fprintf(stderr, "endpoint_publisher: %s\n", e.what());
    return 1;
  }
  return 0;
}
