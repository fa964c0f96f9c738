// leader_reconciler: a controller that runs only while it leads. Replicas started with the same
// --namespace and --lease compete for a coordination.k8s.io/v1 Lease there; the leader
// reconciles the namespace's ConfigMaps (here: prints "reconcile NAMESPACE/NAME"), the others
// wait until it goes. On SIGINT or SIGTERM a leader stops its controller, releases the Lease (the
// next replica leads at its next try, not a whole lease later) and exits.
//
//   leader_reconciler --namespace NS [--identity ID] [--lease NAME] [--lease-seconds N]
//
// Prints "new leader ID", "leading", "reconcile NS/NAME", "stopped leading", one per line.
// --identity defaults to HOSTNAME-PID; --lease to "leader-reconciler". --lease-seconds N (default
// 15) sets the lease; the renew deadline is 2/3 of it and the retry period 2/15 (client-go's
// 15 s, 10 s and 2 s). The cluster comes from ClusterConfig::load_default().
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>

#include "kinformer/client/cluster_config.h"
#include "kinformer/client/dynamic_object.h"
#include "kinformer/client/rest_client.h"
#include "kinformer/controller/controller.h"
#include "kinformer/controller/leader_election.h"
#include "kinformer/informer/informer_factory.h"

using namespace kinformer;
using std::chrono::milliseconds;

namespace {

std::string default_identity() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return std::string(host[0] ? host : "replica") + "-" + std::to_string(::getpid());
}

}  // namespace

int main(int argc, char** argv) {
  std::string ns;
  std::string identity = default_identity();
  std::string lease = "leader-reconciler";
  int lease_seconds = 15;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--namespace" && i + 1 < argc) {
      ns = argv[++i];
    } else if (arg == "--identity" && i + 1 < argc) {
      identity = argv[++i];
    } else if (arg == "--lease" && i + 1 < argc) {
      lease = argv[++i];
    } else if (arg == "--lease-seconds" && i + 1 < argc) {
      lease_seconds = std::stoi(argv[++i]);
    } else {
      ns.clear();
      break;
    }
  }
  if (ns.empty() || lease_seconds < 2) {
    std::fprintf(stderr,
                 "usage: %s --namespace NS [--identity ID] [--lease NAME] [--lease-seconds N>=2]\n",
                 argv[0]);
    return 2;
  }

  // SIGINT and SIGTERM are taken by sigwait() below, never delivered to a thread.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  std::mutex out_mu;
  auto say = [&](const std::string& line) {
    std::lock_guard lock(out_mu);
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  };

  try {
    const milliseconds lease_duration = std::chrono::seconds(lease_seconds);
    const milliseconds renew_deadline = lease_duration * 2 / 3;
    const milliseconds retry_period = lease_duration * 2 / 15;
    auto config = client::ClusterConfig::load_default();
    auto rest = std::make_shared<client::RestClient>(config);
    // The elector's own client: a request it waits for must end well before the renew deadline.
    client::RestClientOptions election_options;
    election_options.request_timeout =
        std::max(milliseconds(500), (renew_deadline - retry_period) / 2);
    auto election_client = std::make_shared<client::RestClient>(config, election_options);

    informer::InformerFactory factory(rest);
    auto& configmaps = factory.informer(
        client::dynamic_resource({"", "v1", "configmaps", "ConfigMap", true}), {.namespace_ = ns});
    factory.start();

    controller::LeaderElector elector({
        .lease_namespace = ns,
        .lease_name = lease,
        .identity = identity,
        .client = election_client,
        .lease_duration = lease_duration,
        .renew_deadline = renew_deadline,
        .retry_period = retry_period,
        .release_on_stop = true,
        .callbacks = {
            .on_started_leading =
                [&](std::stop_token stop) {
                  say("leading");
                  // A controller per term: its handler's initial adds reconcile everything.
                  controller::Controller reconciler({
                      .name = "configmaps",
                      .reconcile = [&](const std::string& key) -> client::Status {
                        const bool exists = configmaps.store().get(key) != nullptr;
                        say("reconcile " + key + (exists ? "" : " (deleted)"));
                        return client::Ok{};
                      },
                      .workers = 2,
                  });
                  reconciler.watch(configmaps);
                  reconciler.run(stop);
                },
            .on_stopped_leading = [&] { say("stopped leading"); },
            .on_new_leader =
                [&](const std::string& holder) {
                  say("new leader " + (holder.empty() ? std::string("(none)") : holder));
                },
        },
    });
    elector.start();

    int signal = 0;
    sigwait(&signals, &signal);
    elector.stop();  // the controller drains, then the Lease is released
    factory.shutdown();
  } catch (const std::exception& e) {  // ConfigError from load_default: it says what it tried
    std::fprintf(stderr, "leader_reconciler: %s\n", e.what());
    return 1;
  }
  return 0;
}
