#include "e2e_env.h"

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>

#include "watch_audit.h"

#ifndef KINFORMER_SOURCE_DIR
#error "KINFORMER_SOURCE_DIR must be defined"
#endif

namespace kinformer::e2e {

client::ClusterConfig admin_config() {
  if (const char* kc = std::getenv("KUBECONFIG"); kc == nullptr || *kc == '\0')
    throw std::runtime_error(
        "KUBECONFIG is not set: run the e2e suites through tools/scripts/test.sh, which starts "
        "the embedded kube-apiserver, or point KUBECONFIG at a cluster (kind)");
  return client::ClusterConfig::from_kubeconfig();
}

std::optional<client::ClusterConfig> restricted_config() {
  try {
    client::KubeconfigOptions options;
    options.context = "restricted";
    return client::ClusterConfig::from_kubeconfig(options);
  } catch (const client::ConfigError& e) {
    // Against kind the context may be missing (the test is skipped); against the embedded
    // launcher it is always written, so its absence is a failure, never a skip.
    if (launcher_available())
      throw std::runtime_error(
          std::string("the launcher's kubeconfig lacks the 'restricted' context: ") + e.what());
    return std::nullopt;
  }
}

bool launcher_available() {
  const char* dir = std::getenv("KINFORMER_E2E_DIR");
  return dir != nullptr && *dir != '\0' && std::getenv("KINFORMER_E2E_LAUNCHED") != nullptr &&
         std::string(std::getenv("KINFORMER_E2E_LAUNCHED")) == "1";
}

int launcher(const std::string& command) {
  const std::string cmd = "bash '" KINFORMER_SOURCE_DIR "/e2e/launcher.sh' " + command +
                          " --dir '" + std::getenv("KINFORMER_E2E_DIR") + "' >&2";
  // Not std::system: `restart-apiserver` starts kube-apiserver as a daemon, and a child
  // inherits every descriptor not marked close-on-exec (Asio opens sockets without it). The
  // daemon would then hold this process's sockets open for its whole life, and a connection
  // closed here (by a TcpProxy, or by a client) would never be closed for its peer: the chaos
  // suite found watches that waited forever on a connection the proxy had closed. The child
  // closes every descriptor above stderr before it runs the launcher.
  const pid_t pid = ::fork();
  if (pid < 0) return 128;
  if (pid == 0) {
    ::close_range(3, ~0U, 0);
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return 128;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

client::RestClientOptions fast_client_options() {
  client::RestClientOptions o;
  o.rate_limit.qps = 500;
  o.rate_limit.burst = 500;
  o.user_agent = "kinformer-e2e/0.1";
  return o;
}

client::ClusterConfig through(const TcpProxy& proxy, client::ClusterConfig config) {
  if (config.tls_server_name.empty()) config.tls_server_name = proxy.upstream_host();
  config.server = proxy.url();
  return config;
}

std::string create_namespace(client::RestClient& client, const std::string& prefix) {
  static std::atomic<unsigned> counter{0};
  std::random_device rd;
  const std::string name =
      prefix + "-" + std::to_string(rd() % 100000) + "-" + std::to_string(counter++);
  auto ns = object(
      "", name, R"({"apiVersion":"v1","kind":"Namespace","metadata":{"name":")" + name + R"("}})");
  auto created = client.create(namespaces(), *ns);
  if (!created)
    throw std::runtime_error("creating namespace " + name + ": " + created.error().to_string());
  return name;
}

long server_watches(client::RestClient& client, const std::string& resource) {
  auto metrics = client.get_raw("/metrics");
  if (!metrics) throw std::runtime_error("GET /metrics: " + metrics.error().to_string());
  if (metrics->status != 200)
    throw std::runtime_error("GET /metrics: HTTP " + std::to_string(metrics->status));
  return tools::audit_watches(metrics->body).count(resource);
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (condition()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // polling interval, not a wait
  }
}

long wait_for_server_watches(client::RestClient& client, const std::string& resource, long expected,
                             std::chrono::milliseconds timeout) {
  long last = -1;
  eventually([&] { return (last = server_watches(client, resource)) == expected; }, timeout);
  return last;
}

std::shared_ptr<client::DynamicObject> object(const std::string& ns, const std::string& name,
                                              std::string json) {
  auto o = std::make_shared<client::DynamicObject>();
  o->metadata.namespace_ = ns;
  o->metadata.name = name;
  o->json = std::move(json);
  return o;
}

const client::ResourceType& secrets() {
  static const auto t = client::dynamic_resource({"", "v1", "secrets", "Secret", true});
  return t;
}
const client::ResourceType& pods() {
  static const auto t = client::dynamic_resource({"", "v1", "pods", "Pod", true});
  return t;
}
const client::ResourceType& endpoints() {
  static const auto t = client::dynamic_resource({"", "v1", "endpoints", "Endpoints", true});
  return t;
}
const client::ResourceType& endpoint_slices() {
  static const auto t =
      client::dynamic_resource({"discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", true});
  return t;
}
const client::ResourceType& namespaces() {
  static const auto t = client::dynamic_resource({"", "v1", "namespaces", "Namespace", false});
  return t;
}

std::map<std::string, std::string> store_state(const informer::SharedInformer& inf) {
  std::map<std::string, std::string> out;
  for (const auto& o : inf.store().list()) out[o->metadata.name] = o->metadata.resource_version;
  return out;
}

std::map<std::string, std::string> server_state(client::RestClient& c,
                                                const client::ResourceType& t,
                                                const std::string& ns) {
  std::map<std::string, std::string> out;
  auto listed = c.list_all(t, ns);
  if (!listed) return {{"<error>", listed.error().to_string()}};
  for (const auto& o : listed->items) out[o->metadata.name] = o->metadata.resource_version;
  return out;
}

}  // namespace kinformer::e2e
