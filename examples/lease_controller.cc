// lease_controller: a controller that acts only while it holds a Lease. Replicas started with the
// same --namespace and --lease compete for a coordination.k8s.io/v1 Lease there; the leader sets
// the annotation kinformer.io/stamped-by=ID on every ConfigMap of the namespace labelled
// kinformer.io/stamp=true that carries no such annotation yet (one that does, whatever its value,
// is left alone). The others wait until the leader goes.
//
//   lease_controller --namespace NS --lease NAME --identity ID [--workers N] [--release-on-exit]
//                    [--timestamps]
//
// stdout: one line per change of role, flushed: "leading ID", "stopped leading ID" (its workers
// have stopped), "new leader OTHER" (another replica was seen holding the Lease). --timestamps
// prefixes each with the wall-clock time in seconds ("1700000000.123456 leading ID"), taken before
// the line is written. Each stamp is logged to stderr.
//
// Durations are client-go's: lease 15 s, renew deadline 10 s, retry period 2 s; followers watch the
// Lease, so a dead leader's lease counts from its last renewal as they saw it come. SIGINT or
// SIGTERM stops it: a leader stops its workers and, with --release-on-exit, releases the Lease so
// the next replica leads as soon as it sees the release instead of after a whole lease. Exit
// status: 0 after a clean stop, 2 for usage or configuration errors (bad flags, an unusable cluster
// configuration), 1 otherwise. The cluster comes from ClusterConfig::load_default() (KUBECONFIG,
// in-cluster, ~/.kube/config).
#include <pthread.h>
#include <signal.h>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>

#include "kinformer/client/cluster_config.h"
#include "kinformer/client/dynamic_object.h"
#include "kinformer/client/error.h"
#include "kinformer/client/rest_client.h"
#include "kinformer/controller/controller.h"
#include "kinformer/controller/leader_election.h"
#include "kinformer/informer/informer_factory.h"

using namespace kinformer;

namespace {

constexpr std::string_view kStampLabel = "kinformer.io/stamp";
constexpr std::string_view kStampAnnotation = "kinformer.io/stamped-by";

struct Flags {
  std::string ns;
  std::string lease;
  std::string identity;
  int workers = 2;
  bool release_on_exit = false;
  bool timestamps = false;
};

// The flags, or nullopt (after a message on stderr) when they are not usable.
std::optional<Flags> parse_flags(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--namespace" && has_value) {
      flags.ns = argv[++i];
    } else if (arg == "--lease" && has_value) {
      flags.lease = argv[++i];
    } else if (arg == "--identity" && has_value) {
      flags.identity = argv[++i];
    } else if (arg == "--workers" && has_value) {
      const std::string_view value = argv[++i];
      const auto [end, ec] =
          std::from_chars(value.data(), value.data() + value.size(), flags.workers);
      if (ec != std::errc{} || end != value.data() + value.size() || flags.workers < 1 ||
          flags.workers > 64) {
        std::fprintf(stderr, "lease_controller: --workers wants a whole number in [1, 64]\n");
        return std::nullopt;
      }
    } else if (arg == "--release-on-exit") {
      flags.release_on_exit = true;
    } else if (arg == "--timestamps") {
      flags.timestamps = true;
    } else {
      std::fprintf(stderr, "lease_controller: unknown flag or missing value: %s\n", argv[i]);
      return std::nullopt;
    }
  }
  if (flags.ns.empty() || flags.lease.empty() || flags.identity.empty()) {
    std::fprintf(stderr, "lease_controller: --namespace, --lease and --identity are required\n");
    return std::nullopt;
  }
  return flags;
}

// `s` as a JSON string literal.
std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\u%04x", static_cast<unsigned>(c));
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// Stamps one ConfigMap ("namespace/name") when it is labelled and not stamped yet. The read is
// fresh (not the cache's), and the patch carries its resourceVersion: if the ConfigMap changed in
// between, the server answers 409 and the key is retried with backoff.
client::Status stamp(client::RestClient& rest, const client::ResourceType& configmaps,
                     const std::string& key, const std::string& identity) {
  const auto slash = key.find('/');
  const std::string ns = key.substr(0, slash);
  const std::string name = key.substr(slash + 1);
  auto current = rest.get(configmaps, ns, name);
  if (!current) {
    if (current.error().http_status == 404) return client::Ok{};  // deleted: nothing to do
    return current.error();
  }
  const auto& meta = (*current)->metadata;
  const std::string* label = client::find_value(meta.labels, kStampLabel);
  if (label == nullptr || *label != "true") return client::Ok{};
  if (client::find_value(meta.annotations, kStampAnnotation) != nullptr) return client::Ok{};
  const std::string patch = R"({"metadata":{"resourceVersion":)" +
                            json_string(meta.resource_version) + R"(,"annotations":{)" +
                            json_string(kStampAnnotation) + ":" + json_string(identity) + "}}}";
  auto patched = rest.patch(configmaps, ns, name, client::PatchType::merge, patch);
  if (!patched) return patched.error();
  std::fprintf(stderr, "lease_controller: stamped %s\n", key.c_str());
  return client::Ok{};
}

}  // namespace

int main(int argc, char** argv) {
  const auto flags = parse_flags(argc, argv);
  if (!flags) {
    std::fprintf(stderr,
                 "usage: %s --namespace NS --lease NAME --identity ID [--workers N] "
                 "[--release-on-exit] [--timestamps]\n",
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
    if (flags->timestamps) {
      const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
      std::printf("%lld.%06lld ", static_cast<long long>(us / 1000000),
                  static_cast<long long>(us % 1000000));
    }
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  };

  std::optional<client::ClusterConfig> config;
  try {
    config = client::ClusterConfig::load_default();
  } catch (const client::ConfigError& e) {  // it says what it tried, never a token
    std::fprintf(stderr, "lease_controller: %s\n", e.what());
    return 2;
  }

  try {
    auto rest = std::make_shared<client::RestClient>(*config);
    // The elector's own client: a request it waits for must end well before the renew deadline
    // (10 s) less the retry period (2 s).
    client::RestClientOptions election_options;
    election_options.request_timeout = std::chrono::seconds(4);
    auto election_client = std::make_shared<client::RestClient>(*config, election_options);

    const auto configmaps = client::dynamic_resource({"", "v1", "configmaps", "ConfigMap", true});
    informer::InformerFactory factory(rest);
    auto& labelled = factory.informer(
        configmaps,
        {.namespace_ = flags->ns, .label_selector = std::string(kStampLabel) + "=true"});
    factory.start();

    controller::LeaderElector elector({
        .lease_namespace = flags->ns,
        .lease_name = flags->lease,
        .identity = flags->identity,
        .client = election_client,
        .release_on_stop = flags->release_on_exit,
        .callbacks = {
            .on_started_leading =
                [&](const std::stop_token& stop) {
                  say("leading " + flags->identity);
                  // A controller per term: its handler's initial adds queue every labelled
                  // ConfigMap again.
                  controller::Controller stamper({
                      .name = "stamper",
                      .reconcile =
                          [&](const std::string& key) {
                            return stamp(*rest, configmaps, key, flags->identity);
                          },
                      .workers = flags->workers,
                  });
                  stamper.watch(labelled);
                  stamper.run(stop);  // returns once the workers stopped
                },
            .on_stopped_leading = [&] { say("stopped leading " + flags->identity); },
            .on_new_leader =
                [&](const std::string& holder) {
                  if (!holder.empty() && holder != flags->identity) say("new leader " + holder);
                },
        },
    });
    elector.start();

    int signal = 0;
    sigwait(&signals, &signal);
    elector.stop();  // the workers stop, then (--release-on-exit) the Lease is released
    factory.shutdown();
  } catch (const client::ConfigError& e) {  // e.g. an invalid namespace, lease name or selector
    std::fprintf(stderr, "lease_controller: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lease_controller: %s\n", e.what());
    return 1;
  }
  return 0;
}
