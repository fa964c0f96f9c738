// Built against the installed kinformer package, as a user's project would be: a factory with
// an in-memory lister-watcher, one handler, one object; and the mesh layer's endpoint index with
// one slice. Exits non-zero if anything misbehaves. The core API only, unless built with
// KINFORMER_CONSUMER_PROMETHEUS (linking kinformer::prometheus): then the factory's metrics go
// to a PrometheusRegistry, read back from prometheus-cpp.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

#include "kinformer/client/endpoint_slice.h"
#include "kinformer/client/secret.h"
#include "kinformer/informer/informer_factory.h"
#include "kinformer/mesh/endpoint_index.h"
#include "kinformer/version.h"
#ifdef KINFORMER_CONSUMER_PROMETHEUS
#include <prometheus/registry.h>

#include "kinformer/prometheus/prometheus_registry.h"
#endif

namespace {

using namespace kinformer;

// Lists one Secret; its watch ends cleanly until cancelled.
class OneSecret final : public client::ListerWatcher {
 public:
  client::Result<client::ObjectList> list(const client::ListOptions&) override {
    auto secret = std::make_shared<client::Secret>();
    secret->metadata.namespace_ = "mesh";
    secret->metadata.name = "ca-root";
    secret->metadata.resource_version = "7";
    return client::ObjectList{{secret}, "7", ""};
  }
  client::Result<client::WatchStreamPtr> watch(const client::ListOptions&) override {
    struct Idle final : client::WatchStream {
      client::Result<std::optional<client::WatchEvent>> next() override {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return cancelled; });
        return client::Error::make(client::Errc::cancelled, "cancelled");
      }
      void cancel() override {
        std::lock_guard lock(mu);
        cancelled = true;
        cv.notify_all();
      }
      std::mutex mu;
      std::condition_variable cv;
      bool cancelled = false;
    };
    return client::WatchStreamPtr(std::make_unique<Idle>());
  }
};

}  // namespace

int main() {
  informer::FactoryOptions options;
#ifdef KINFORMER_CONSUMER_PROMETHEUS
  auto prometheus = std::make_shared<prom::PrometheusRegistry>();
  options.registry = prometheus;
#endif
  informer::InformerFactory factory(
      [](const client::ResourceType&, const std::string&) { return std::make_unique<OneSecret>(); },
      options);
  // OneSecret answers LISTs, not streaming lists (the factory's default).
  auto secrets = factory.informer<client::Secret>({.namespace_ = "mesh", .use_watch_list = false});
  std::atomic<int> adds{0};
  auto registration = secrets.add_handler({.add = [&](const auto& s, bool) {
    if (s->metadata.name == "ca-root") ++adds;
  }});
  factory.start();
  if (!factory.wait_for_cache_sync(std::chrono::seconds(10))) {
    std::fprintf(stderr, "consumer: cache did not sync\n");
    return 1;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (adds.load() == 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  if (adds.load() != 1 || secrets.handler_count() != 1) {
    std::fprintf(stderr, "consumer: adds=%d handlers=%zu\n", adds.load(), secrets.handler_count());
    return 1;
  }
  // The reflector counts the list once its sink has it: a moment after the sync.
  auto& lists = secrets.untyped().metrics().initial_lists;
  while (lists.value() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  if (lists.value() != 1) {
    std::fprintf(stderr, "consumer: the initial list was not counted\n");
    return 1;
  }
#ifdef KINFORMER_CONSUMER_PROMETHEUS
  bool exported = false;
  for (const auto& family : prometheus->registry().Collect()) {
    exported = exported || family.name == "kinformer_watch_starts_total";
  }
  if (!exported) {
    std::fprintf(stderr, "consumer: kinformer_watch_starts_total is not in the registry\n");
    return 1;
  }
  std::printf("consumer: metrics exported through kinformer::prometheus\n");
#endif
  registration.close();
  factory.shutdown();

  // The mesh layer: one slice of a service in one cluster reaches a watched subset.
  mesh::EndpointIndex index;
  mesh::EndpointQuery query;
  query.service = {"mesh", "api"};
  query.port_name = "http";
  std::atomic<std::size_t> seen{0};
  auto watch = index.watch(query, [&](const mesh::EndpointSnapshotPtr& s) {
    if (const auto* part = s->cluster("local")) seen = part->endpoints.size();
  });
  auto slice = std::make_shared<client::EndpointSlice>();
  slice->metadata.namespace_ = "mesh";
  slice->metadata.name = "api-1";
  slice->metadata.labels = {{"kubernetes.io/service-name", "api"}};
  slice->ports = {{"http", 8080, "TCP", ""}};
  slice->endpoints.resize(1);
  slice->endpoints[0].addresses = {"10.0.0.1"};
  if (!index.upsert_slice("local", slice) || seen.load() != 1) {
    std::fprintf(stderr, "consumer: the endpoint index did not deliver the slice\n");
    return 1;
  }
  std::printf(
      "consumer ok (kinformer %s): informer synced, handler saw the secret, shutdown clean; "
      "endpoint index delivered the slice\n",
      kinformer::kVersion);
  return 0;
}
