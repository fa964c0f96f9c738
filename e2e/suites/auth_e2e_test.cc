// Auth faults against a real API server: an informer whose user may not list (403),
// whose token file holds a wrong token (401), or whose service-account token was revoked (401)
// backs off with a bounded number of requests, reports what is wrong through last_error() and
// kinformer_request_errors_total, stays unsynced, and recovers without a restart once the
// permission is granted or a valid token is rotated into its file.
//
// Tokens are secrets: this file never prints one, nor Secret data (the informer's cache is
// compared by name and resourceVersion only).

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "e2e_env.h"
#include "kinformer/informer/backoff.h"
#include "kinformer/informer/informer_factory.h"

namespace kinformer::e2e {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using informer::InformerFactory;

// How long each test watches the informer while the fault lasts: long enough for the backoff
// to grow (client-go's numbers: 0.8 s doubling to 30 s), short enough for CI.
constexpr auto kFaultWindow = 20s;
// The recovery's deadline: the retry after the window waits up to 2 x 25.6 s (jittered backoff).
constexpr auto kRecoveryDeadline = 150s;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// The most list attempts a reflector may make in `window` from its first attempt, by the
// documented backoff (BackoffOptions, jitter only lengthens a wait): attempts at 0, then after
// initial, initial*factor, ... capped at max. The reflector's time per request only lowers it.
long max_attempts(const informer::BackoffOptions& b, Clock::duration window) {
  long attempts = 1;
  double at = 0;
  double delay = std::chrono::duration<double>(b.initial).count();
  const double cap = std::chrono::duration<double>(b.max).count();
  for (;;) {
    at += std::min(delay, cap);
    if (at > seconds(window)) return attempts;
    ++attempts;
    delay *= b.factor;
  }
}

// One line per case, printed as each case ends and again together at exit.
struct Summary {
  std::mutex mu;
  std::vector<std::string> lines;
  void add(std::string line) {
    std::printf("AUTH-FAULT %s\n", line.c_str());
    std::fflush(stdout);
    std::lock_guard lock(mu);
    lines.push_back(std::move(line));
  }
  ~Summary() {
    if (lines.empty()) return;
    std::printf("\n=== auth faults: summary ===\n");
    for (const auto& l : lines) std::printf("%s\n", l.c_str());
    std::fflush(stdout);
  }
};
Summary g_summary;

// Failed authentications counted by the server itself (authentication_attempts{result="error"}:
// every 401), read from /metrics. -1 when the server does not expose it.
long server_failed_authentications(client::RestClient& admin) {
  auto metrics = admin.get_raw("/metrics");
  if (!metrics || metrics->status != 200) return -1;
  std::istringstream in(metrics->body);
  for (std::string line; std::getline(in, line);) {
    const std::string prefix = "authentication_attempts{result=\"error\"} ";
    if (line.rfind(prefix, 0) == 0) return static_cast<long>(std::stod(line.substr(prefix.size())));
  }
  return 0;  // no failure yet: the series appears with the first one
}

const client::ResourceType& roles() {
  static const auto t =
      client::dynamic_resource({"rbac.authorization.k8s.io", "v1", "roles", "Role", true});
  return t;
}
const client::ResourceType& role_bindings() {
  static const auto t = client::dynamic_resource(
      {"rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", true});
  return t;
}
const client::ResourceType& service_accounts() {
  static const auto t =
      client::dynamic_resource({"", "v1", "serviceaccounts", "ServiceAccount", true});
  return t;
}
// POST .../serviceaccounts/NAME/token (the TokenRequest API): the subresource as a resource path.
client::ResourceType token_request(const std::string& service_account) {
  return client::dynamic_resource(
      {"", "v1", "serviceaccounts/" + service_account + "/token", "TokenRequest", true});
}

// Grants get/list/watch on `resource` in `ns` to `subject` (a JSON RBAC subject).
void grant(client::RestClient& admin, const std::string& ns, const std::string& name,
           const std::string& resource, const std::string& subject) {
  auto role =
      admin.create(roles(), *object(ns, name,
                                    R"({"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role",)"
                                    R"("metadata":{"name":")" +
                                        name + R"(","namespace":")" + ns +
                                        R"("},)"
                                        R"("rules":[{"apiGroups":[""],"resources":[")" +
                                        resource + R"("],"verbs":["get","list","watch"]}]})"));
  ASSERT_TRUE(role) << role.error().to_string();
  auto binding = admin.create(
      role_bindings(),
      *object(ns, name,
              R"({"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding",)"
              R"("metadata":{"name":")" +
                  name + R"(","namespace":")" + ns +
                  R"("},)"
                  R"("subjects":[)" +
                  subject +
                  R"(],)"
                  R"("roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":")" +
                  name + R"("}})"));
  ASSERT_TRUE(binding) << binding.error().to_string();
}

void create_service_account(client::RestClient& admin, const std::string& ns,
                            const std::string& name) {
  auto sa =
      admin.create(service_accounts(), *object(ns, name,
                                               R"({"apiVersion":"v1","kind":"ServiceAccount",)"
                                               R"("metadata":{"name":")" +
                                                   name + R"(","namespace":")" + ns + R"("}})"));
  ASSERT_TRUE(sa) << sa.error().to_string();
}

// A fresh token of the service account from the TokenRequest API. Never printed.
std::string request_token(client::RestClient& admin, const std::string& ns, const std::string& sa) {
  auto created =
      admin.create(token_request(sa), *object(ns, sa,
                                              R"({"apiVersion":"authentication.k8s.io/v1",)"
                                              R"("kind":"TokenRequest","spec":{}})"));
  if (!created) {
    ADD_FAILURE() << "TokenRequest for " << ns << "/" << sa << ": " << created.error().to_string();
    return "";
  }
  const auto* dyn = dynamic_cast<const client::DynamicObject*>(created.value().get());
  if (dyn == nullptr) {
    ADD_FAILURE() << "TokenRequest: not a DynamicObject";
    return "";
  }
  rapidjson::Document doc;
  doc.Parse(dyn->json.c_str(), dyn->json.size());
  if (doc.HasParseError() || !doc.IsObject() || !doc.HasMember("status") ||
      !doc["status"].IsObject() || !doc["status"].HasMember("token") ||
      !doc["status"]["token"].IsString()) {
    ADD_FAILURE() << "TokenRequest response has no status.token";  // the body is not printed
    return "";
  }
  return doc["status"]["token"].GetString();
}

// The HTTP status a one-off list of `resource` in `ns` gets with `token` (0: no answer).
int status_with_token(const client::ClusterConfig& base, const std::string& token,
                      const client::ResourceType& type, const std::string& ns) {
  client::ClusterConfig config = base;
  client::Credentials c;
  c.token = token;
  config.credentials = client::static_credentials(c);
  client::RestClient client(config, fast_client_options());
  auto r = client.list(type, ns, {});
  if (r) return 200;
  return r.error().http_status;
}

// A folder with a kubeconfig whose user reads its bearer token from `token` in that folder
// (kubeconfig `tokenFile`), for the admin context's cluster. Removed on destruction.
class TokenFileKubeconfig {
 public:
  explicit TokenFileKubeconfig(const client::ClusterConfig& admin) {
    char tmpl[] = "/tmp/kinformer-auth-e2e-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    std::ofstream(dir_ + "/ca.crt") << admin.ca_pem;
    std::ofstream kc(dir_ + "/kubeconfig");
    kc << "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: "
       << admin.server << "\n";
    if (!admin.ca_pem.empty()) kc << "    certificate-authority: " << dir_ << "/ca.crt\n";
    if (!admin.tls_server_name.empty())
      kc << "    tls-server-name: " << admin.tls_server_name << "\n";
    kc << "users:\n- name: u\n  user:\n    tokenFile: " << token_path() << "\n"
       << "contexts:\n- name: ctx\n  context:\n    cluster: c\n    user: u\n"
       << "current-context: ctx\n";
  }
  ~TokenFileKubeconfig() { std::filesystem::remove_all(dir_); }
  TokenFileKubeconfig(const TokenFileKubeconfig&) = delete;
  TokenFileKubeconfig& operator=(const TokenFileKubeconfig&) = delete;

  [[nodiscard]] std::string token_path() const { return dir_ + "/token"; }
  /// Replaces the token file atomically, as kubelet does for projected tokens: a new file
  /// written beside it, then renamed over it (readers see the old or the new token, never half).
  void rotate(const std::string& token) const {
    const std::string tmp = dir_ + "/.token.new";
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out << token << "\n";
    }
    std::filesystem::permissions(
        tmp, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    std::filesystem::rename(tmp, token_path());
  }
  [[nodiscard]] client::ClusterConfig config() const {
    client::KubeconfigOptions o;
    o.path = dir_ + "/kubeconfig";
    return client::ClusterConfig::from_kubeconfig(o);
  }

 private:
  std::string dir_;
};

// What the test saw while the fault lasted. The informers run with the defaults: each sync
// attempt opens a WatchList (a watch request); a refusal (403) falls back to one LIST in the
// same attempt, a 401 is not a refusal (a LIST would fail the same way) and backs off at once.
struct FaultObservation {
  long attempts = 0;         // sync attempts: kinformer_requests_total{verb="watch"} (WatchLists)
  long requests = 0;         // every request: watches and lists
  long errors = 0;           // kinformer_request_errors_total{verb=watch|list,reason=...}
  long server_counted = -1;  // the server's own count, where it keeps one (401s)
  Clock::duration window{};  // from the factory's start to the end of the window
  bool synced_during_fault = false;
  std::optional<informer::SyncError> error;
  [[nodiscard]] double per_minute() const { return requests * 60.0 / seconds(window); }
};

// Starts the factory and watches `inf` for kFaultWindow: has_synced() must stay false the whole
// time. `server_count` (optional) reads the server's own counter of the failures.
FaultObservation observe_fault(InformerFactory& factory, informer::SharedInformer& inf,
                               const std::string& reason,
                               const std::function<long()>& server_count = {}) {
  FaultObservation f;
  const long server_before = server_count ? server_count() : -1;
  const auto start = Clock::now();
  factory.start();
  // An observation window, not a wait for a condition: sample until it has passed.
  while (Clock::now() - start < kFaultWindow) {
    f.synced_during_fault = f.synced_during_fault || inf.has_synced();
    std::this_thread::sleep_for(100ms);  // sampling interval
  }
  // The counters and last_error() are read one after the other while the reflector goes on
  // retrying: a failure landing in between would make them disagree by one. Read until a
  // failure count of last_error() is the same before and after the counters and equals them
  // (a few tries, 10 ms apart: attempts are seconds apart), or keep the last reading.
  auto& m = inf.metrics();
  for (int tries = 0; tries < 10; ++tries) {
    if (tries > 0) std::this_thread::sleep_for(10ms);
    const std::optional<informer::SyncError> before = inf.last_error();
    f.attempts = static_cast<long>(m.watch_requests.value());
    f.requests = f.attempts + static_cast<long>(m.list_requests.value());
    f.errors = static_cast<long>(m.request_errors("watch", reason).value() +
                                 m.request_errors("list", reason).value());
    f.error = inf.last_error();
    const bool stable = before.has_value() == f.error.has_value() &&
                        (!before || before->consecutive == f.error->consecutive);
    if (stable && f.error && static_cast<std::uint64_t>(f.errors) == f.error->consecutive) break;
  }
  f.window = Clock::now() - start;
  if (server_count) f.server_counted = server_count() - server_before;
  f.synced_during_fault = f.synced_during_fault || inf.has_synced();
  return f;
}

// The assertions every fault shares: unsynced, the error named, requests bounded by the backoff.
// `verb`: the request that failed last in an attempt; `per_attempt`: requests per attempt.
void expect_bounded_fault(const FaultObservation& f, const std::string& reason, int http_status,
                          const std::string& verb, long per_attempt) {
  EXPECT_FALSE(f.synced_during_fault) << "has_synced() must stay false while every sync fails";
  ASSERT_TRUE(f.error.has_value()) << "last_error() must report the failing request";
  EXPECT_EQ(f.error->verb, verb);
  EXPECT_EQ(f.error->reason, reason);
  EXPECT_EQ(f.error->error.http_status, http_status);
  EXPECT_GE(f.error->consecutive, 2u) << "the reflector retries";
  EXPECT_EQ(static_cast<std::uint64_t>(f.errors), f.error->consecutive) << "every failure counted";
  EXPECT_GE(f.attempts, 2) << "the reflector retries";
  // Every attempt failed; none may come sooner than the backoff allows.
  const long bound = max_attempts(informer::BackoffOptions{}, f.window) + 1;  // +1: sampling slack
  EXPECT_LE(f.attempts, bound) << "sync attempts in " << seconds(f.window) << " s, backoff allows "
                               << bound;
  // +-1: an attempt in flight (its second request not sent yet) when the counters were read.
  EXPECT_LE(f.requests, f.attempts * per_attempt) << "requests per attempt";
  EXPECT_GE(f.requests, f.attempts * per_attempt - 1) << "requests per attempt";
  if (f.server_counted >= 0) {
    // The server counts what the client really sent: no hidden retries (a 401 with an
    // unchanged token is not retried). +-1: a request in flight while the two counters were
    // read one after the other.
    EXPECT_LE(f.server_counted, bound * per_attempt)
        << "failed authentications counted by the server";
    EXPECT_LE(f.server_counted, f.requests + 1) << "401s counted by the server vs requests sent";
    EXPECT_GE(f.server_counted, f.requests - 1) << "401s counted by the server vs requests sent";
  }
}

// Waits until the informer is synced, its cache equals the server's list and its error is gone;
// returns the time it took from `since`, or a negative value on timeout.
double wait_recovered(informer::SharedInformer& inf, client::RestClient& admin,
                      const client::ResourceType& type, const std::string& ns,
                      Clock::time_point since) {
  std::map<std::string, std::string> expected;
  const bool ok = eventually(
      [&] {
        if (!inf.has_synced()) return false;
        expected = server_state(admin, type, ns);
        return store_state(inf) == expected && !inf.last_error().has_value();
      },
      std::chrono::duration_cast<std::chrono::milliseconds>(kRecoveryDeadline));
  if (!ok) return -1;
  return seconds(Clock::now() - since);
}

std::string summary_line(const std::string& name, const FaultObservation& f,
                         double recovered_after) {
  char buf[512];
  std::snprintf(
      buf, sizeof buf,
      "case=%-22s error=\"%s\" attempts=%ld requests=%ld in %.1fs (%.1f/min; backoff allows %ld "
      "attempts)%s recovered_after=%.1fs",
      name.c_str(), f.error ? f.error->to_string().c_str() : "<none>", f.attempts, f.requests,
      seconds(f.window), f.per_minute(), max_attempts(informer::BackoffOptions{}, f.window) + 1,
      f.server_counted >= 0 ? (" server_401s=" + std::to_string(f.server_counted)).c_str() : "",
      recovered_after);
  return buf;
}

std::string pod_json(const std::string& ns, const std::string& name) {
  return R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")" + name + R"(","namespace":")" +
         ns + R"("},"spec":{"containers":[{"name":"c","image":"registry.invalid/none:1"}]}})";
}

std::string secret_json(const std::string& ns, const std::string& name) {
  return R"({"apiVersion":"v1","kind":"Secret","metadata":{"name":")" + name +
         R"(","namespace":")" + ns + R"("},"data":{"k":"dg=="}})";
}

informer::ListerWatcherFactory lister_watchers(client::RestClient& client) {
  return [&client](const client::ResourceType& type, const std::string& ns) {
    return client.lister_watcher(type, ns);
  };
}

class AuthE2E : public ::testing::Test {
 protected:
  void SetUp() override { ns_ = create_namespace(admin_, "auth-e2e"); }
  client::RestClient admin_{admin_config(), fast_client_options()};
  std::string ns_;
};

// 403: the `restricted` user has no RBAC binding. Its Secrets informer backs off, says
// "forbidden" (with the server's message naming user, verb, resource and namespace), stays
// unsynced; a Role + RoleBinding granting list/watch lets it recover without a restart.
TEST_F(AuthE2E, ForbiddenListBacksOffReportsForbiddenAndRecoversWhenGranted) {
  auto restricted = restricted_config();
  if (!restricted)
    GTEST_SKIP() << "KUBECONFIG has no 'restricted' context (the embedded launcher's has)";
  for (int i = 0; i < 3; ++i) {
    const std::string name = "s" + std::to_string(i);
    ASSERT_TRUE(admin_.create(secrets(), *object(ns_, name, secret_json(ns_, name))));
  }
  client::RestClient client(*restricted);  // default options: the library as users run it
  InformerFactory factory(lister_watchers(client));
  auto& inf = factory.informer(secrets(), {.namespace_ = ns_});

  FaultObservation f = observe_fault(factory, inf, "forbidden");
  // The WatchList is refused (403), so each attempt falls back to a LIST, which is 403 too.
  expect_bounded_fault(f, "forbidden", 403, "list", 2);
  if (f.error) {
    EXPECT_NE(f.error->error.message.find("forbidden"), std::string::npos)
        << f.error->error.message;
    EXPECT_NE(f.error->error.message.find("restricted"), std::string::npos) << "names the user";
    EXPECT_NE(f.error->error.message.find(ns_), std::string::npos) << "names the namespace";
  }
  EXPECT_EQ(inf.store().size(), 0u);

  grant(admin_, ns_, "secrets-reader", "secrets",
        R"({"kind":"User","apiGroup":"rbac.authorization.k8s.io","name":"restricted"})");
  const auto granted = Clock::now();
  const double recovered = wait_recovered(inf, admin_, secrets(), ns_, granted);
  EXPECT_GE(recovered, 0) << "the informer did not recover after the grant; last error: "
                          << (inf.last_error() ? inf.last_error()->to_string() : "<none>");
  EXPECT_EQ(inf.store().size(), 3u);
  // Still the same informer, now watching: a change reaches its cache.
  ASSERT_TRUE(admin_.create(secrets(), *object(ns_, "late", secret_json(ns_, "late"))));
  EXPECT_TRUE(eventually([&] { return inf.store().get(ns_ + "/late") != nullptr; }));
  g_summary.add(summary_line("403 forbidden", f, recovered));
}

// 401: the token file holds a token the server does not know. The informer backs off (the
// server's own count of failed authentications proves no hidden retries), says "unauthorized",
// and recovers once a valid token is renamed over the file.
TEST_F(AuthE2E, WrongTokenInTokenFileBacksOffAndRecoversWhenTheFileIsRotated) {
  create_service_account(admin_, ns_, "reader");
  grant(admin_, ns_, "pods-reader", "pods",
        R"({"kind":"ServiceAccount","name":"reader","namespace":")" + ns_ + R"("})");
  for (int i = 0; i < 3; ++i) {
    const std::string name = "p" + std::to_string(i);
    ASSERT_TRUE(admin_.create(pods(), *object(ns_, name, pod_json(ns_, name))));
  }
  TokenFileKubeconfig kubeconfig(admin_config());
  kubeconfig.rotate("not-a-token-this-server-issued");
  client::RestClient client(kubeconfig.config());
  InformerFactory factory(lister_watchers(client));
  auto& inf = factory.informer(pods(), {.namespace_ = ns_});

  FaultObservation f = observe_fault(factory, inf, "unauthorized",
                                     [&] { return server_failed_authentications(admin_); });
  expect_bounded_fault(f, "unauthorized", 401, "watch", 1);

  const std::string token = request_token(admin_, ns_, "reader");
  ASSERT_FALSE(token.empty());
  kubeconfig.rotate(token);
  const auto rotated = Clock::now();
  const double recovered = wait_recovered(inf, admin_, pods(), ns_, rotated);
  EXPECT_GE(recovered, 0) << "the informer did not recover after the rotation; last error: "
                          << (inf.last_error() ? inf.last_error()->to_string() : "<none>");
  EXPECT_EQ(inf.store().size(), 3u);
  g_summary.add(summary_line("401 wrong token file", f, recovered));
}

// 401 after revocation: a service-account token from the TokenRequest API works, then the
// ServiceAccount is deleted (the server rejects its tokens); the informer starts on that file,
// backs off and says "unauthorized". The ServiceAccount is recreated, a new token requested and
// rotated into the file: the informer recovers.
TEST_F(AuthE2E, RevokedServiceAccountTokenBacksOffAndRecoversWithARotatedToken) {
  create_service_account(admin_, ns_, "mesh");
  grant(admin_, ns_, "pods-reader", "pods",
        R"({"kind":"ServiceAccount","name":"mesh","namespace":")" + ns_ + R"("})");
  ASSERT_TRUE(admin_.create(pods(), *object(ns_, "p0", pod_json(ns_, "p0"))));
  const client::ClusterConfig admin_cfg = admin_config();

  const std::string revoked = request_token(admin_, ns_, "mesh");
  ASSERT_FALSE(revoked.empty());
  ASSERT_EQ(status_with_token(admin_cfg, revoked, pods(), ns_), 200)
      << "the token works before the revocation";
  ASSERT_TRUE(admin_.delete_(service_accounts(), ns_, "mesh"));
  ASSERT_TRUE(eventually([&] { return status_with_token(admin_cfg, revoked, pods(), ns_) == 401; }))
      << "the server still accepts the deleted ServiceAccount's token";

  TokenFileKubeconfig kubeconfig(admin_cfg);
  kubeconfig.rotate(revoked);
  client::RestClient client(kubeconfig.config());
  InformerFactory factory(lister_watchers(client));
  auto& inf = factory.informer(pods(), {.namespace_ = ns_});

  FaultObservation f = observe_fault(factory, inf, "unauthorized",
                                     [&] { return server_failed_authentications(admin_); });
  expect_bounded_fault(f, "unauthorized", 401, "watch", 1);

  create_service_account(admin_, ns_, "mesh");  // a new UID: the old token stays revoked
  const std::string fresh = request_token(admin_, ns_, "mesh");
  ASSERT_FALSE(fresh.empty());
  ASSERT_NE(fresh, revoked);
  kubeconfig.rotate(fresh);
  const auto rotated = Clock::now();
  const double recovered = wait_recovered(inf, admin_, pods(), ns_, rotated);
  EXPECT_GE(recovered, 0) << "the informer did not recover after the rotation; last error: "
                          << (inf.last_error() ? inf.last_error()->to_string() : "<none>");
  EXPECT_EQ(inf.store().size(), 1u);
  g_summary.add(summary_line("401 revoked SA token", f, recovered));
}

}  // namespace
}  // namespace kinformer::e2e
