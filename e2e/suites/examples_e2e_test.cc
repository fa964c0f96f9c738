// The programs in examples/ against a real API server: each is run as a user would run it
// (KUBECONFIG from the environment, through ClusterConfig::load_default) and its output checked.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "e2e_env.h"
#include "kinformer/controller/lease_lock.h"

#if !defined(CERT_DISTRIBUTOR_PATH) || !defined(ENDPOINT_PUBLISHER_PATH) || \
    !defined(LEASE_CONTROLLER_PATH)
#error "CERT_DISTRIBUTOR_PATH, ENDPOINT_PUBLISHER_PATH and LEASE_CONTROLLER_PATH must be defined"
#endif

namespace kinformer::e2e {
namespace {

using namespace std::chrono_literals;

// One run of an example, stdout and stderr to files, polled while it runs.
class Program {
 public:
  // `env`: "NAME=VALUE" entries set on top of this process's environment.
  Program(const std::string& path, const std::vector<std::string>& args,
          const std::vector<std::string>& env = {}) {
    static int counter = 0;
    base_ = "/tmp/examples-e2e-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
    // Built before fork(): the child of a threaded process may only call async-signal-safe
    // functions.
    std::vector<std::string> environment(env);
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string entry = *e;
      const std::string name = entry.substr(0, entry.find('=') + 1);
      if (std::none_of(env.begin(), env.end(),
                       [&](const std::string& x) { return x.starts_with(name); }))
        environment.push_back(entry);
    }
    std::vector<char*> envp;
    for (auto& e : environment) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::vector<char*> argv{const_cast<char*>(path.c_str())};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close_range(3, ~0U, 0);  // none of this process's sockets
      const int out = ::open((base_ + ".out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      const int err = ::open((base_ + ".err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      ::dup2(out, 1);
      ::dup2(err, 2);
      ::execve(path.c_str(), argv.data(), envp.data());
      ::_exit(127);
    }
  }
  ~Program() {
    if (pid_ > 0 && code_ < 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    std::remove((base_ + ".out").c_str());
    std::remove((base_ + ".err").c_str());
  }
  std::string out() const { return slurp(base_ + ".out"); }
  // The output's lines.
  std::vector<std::string> lines() const {
    std::vector<std::string> result;
    std::istringstream in(out());
    for (std::string line; std::getline(in, line);) result.push_back(line);
    return result;
  }
  bool printed(const std::string& line) const {
    const auto all = lines();
    return std::find(all.begin(), all.end(), line) != all.end();
  }
  void signal(int sig) const { ::kill(pid_, sig); }
  std::string err() const { return slurp(base_ + ".err"); }
  // The exit status once the program has exited within `timeout`; -1 if it is still running.
  int wait(std::chrono::milliseconds timeout = 60s) {
    eventually(
        [&] {
          int status = 0;
          if (code_ < 0 && ::waitpid(pid_, &status, WNOHANG) == pid_)
            code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
          return code_ >= 0;
        },
        timeout);
    return code_;
  }

 private:
  std::string base_;
  pid_t pid_ = -1;
  int code_ = -1;
};

class ExamplesE2E : public ::testing::Test {
 protected:
  ExamplesE2E() : client_(admin_config(), fast_client_options()) {}
  client::RestClient client_;
};

TEST_F(ExamplesE2E, CertDistributorPrintsTlsSecretsByNameAndSizeNeverTheirBytes) {
  const std::string ns = create_namespace(client_, "examples-certs");
  // base64 of "CERT-BYTES-e2e" (14 bytes) and "KEY-BYTES-e2e" (13 bytes).
  const std::string tls =
      R"({"apiVersion":"v1","kind":"Secret","metadata":{"name":"mesh-tls","namespace":")" + ns +
      R"("},"type":"kubernetes.io/tls","data":{"tls.crt":"Q0VSVC1CWVRFUy1lMmU=","tls.key":"S0VZLUJZVEVTLWUyZQ=="}})";
  ASSERT_TRUE(client_.create(secrets(), *object(ns, "mesh-tls", tls)));
  const std::string opaque =
      R"({"apiVersion":"v1","kind":"Secret","metadata":{"name":"not-a-cert","namespace":")" + ns +
      R"("},"type":"Opaque","data":{"x":"eA=="}})";
  ASSERT_TRUE(client_.create(secrets(), *object(ns, "not-a-cert", opaque)));

  Program run(CERT_DISTRIBUTOR_PATH, {"--namespace", ns, "--exit-after-sync"});
  ASSERT_EQ(run.wait(), 0) << run.err();
  const std::string out = run.out();
  EXPECT_NE(out.find("add mesh-tls (cert 14 bytes)"), std::string::npos) << out;
  EXPECT_EQ(out.find("not-a-cert"), std::string::npos) << out;  // the field selector
  for (const char* secret : {"CERT-BYTES", "KEY-BYTES", "Q0VSVC", "S0VZ"}) {
    EXPECT_EQ(out.find(secret), std::string::npos) << secret << " in " << out;
    EXPECT_EQ(run.err().find(secret), std::string::npos) << secret << " in " << run.err();
  }
}

TEST_F(ExamplesE2E, EndpointPublisherPrintsTheSetAndItsEmptinessAfterTheSliceGoes) {
  const std::string ns = create_namespace(client_, "examples-eps");
  const std::string slice =
      R"({"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"web-abc","namespace":")" +
      ns +
      R"(","labels":{"kubernetes.io/service-name":"web"}},"addressType":"IPv4",)"
      R"("endpoints":[{"addresses":["10.1.2.3"],"conditions":{"ready":true}}],)"
      R"("ports":[{"name":"http","port":8080,"protocol":"TCP"}]})";
  ASSERT_TRUE(client_.create(endpoint_slices(), *object(ns, "web-abc", slice)));

  // Two changes: the initial add, then the deletion.
  Program run(ENDPOINT_PUBLISHER_PATH,
              {"--namespace", ns, "--service", "web", "--max-events", "2"});
  ASSERT_TRUE(eventually([&] {
    return run.out().find("10.1.2.3 ready=true port=8080") != std::string::npos;
  })) << run.out()
      << run.err();
  EXPECT_EQ(run.out().find("(no endpoints)"), std::string::npos) << run.out();
  ASSERT_TRUE(client_.delete_(endpoint_slices(), ns, "web-abc"));
  ASSERT_EQ(run.wait(), 0) << run.out() << run.err();
  EXPECT_NE(run.out().find(ns + "/web:\n  (no endpoints)\n"), std::string::npos) << run.out();
}

// lease_controller's role lines (it runs with --timestamps): "SECONDS ROLE", e.g.
// "1700000000.123456 leading a".
struct RoleLine {
  double at = 0;
  std::string role;
};

std::vector<RoleLine> roles(const Program& p) {
  std::vector<RoleLine> result;
  for (const auto& line : p.lines()) {
    const auto space = line.find(' ');
    if (space == std::string::npos) continue;
    result.push_back({std::strtod(line.substr(0, space).c_str(), nullptr), line.substr(space + 1)});
  }
  return result;
}

// When `p` first printed `role`, if it did.
std::optional<double> printed_at(const Program& p, const std::string& role) {
  for (const auto& r : roles(p))
    if (r.role == role) return r.at;
  return std::nullopt;
}

double wall_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The times `id` acted as leader: from each "leading ID" to its "stopped leading ID", or to `end`
// (its death, or now) for a term still open.
std::vector<std::pair<double, double>> terms(const Program& p, const std::string& id, double end) {
  std::vector<std::pair<double, double>> result;
  double since = -1;  // no term open
  for (const auto& r : roles(p)) {
    if (r.role == "leading " + id) since = r.at;
    if (r.role == "stopped leading " + id && since >= 0) {
      result.emplace_back(since, r.at);
      since = -1;
    }
  }
  if (since >= 0) result.emplace_back(since, end);
  return result;
}

// Whether two replicas ever acted as leader at the same time.
bool two_leaders(const std::vector<std::pair<double, double>>& x,
                 const std::vector<std::pair<double, double>>& y) {
  for (const auto& [x0, x1] : x)
    for (const auto& [y0, y1] : y)
      if (x0 < y1 && y0 < x1) return true;
  return false;
}

class LeaseControllerE2E : public ExamplesE2E {
 protected:
  const client::ResourceType configmaps_ =
      client::dynamic_resource({"", "v1", "configmaps", "ConfigMap", true});

  void create_configmap(const std::string& ns, const std::string& name, const std::string& labels,
                        const std::string& annotations = "{}") {
    ASSERT_TRUE(client_.create(
        configmaps_, *object(ns, name,
                             R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":")" +
                                 name + R"(","namespace":")" + ns + R"(","labels":)" + labels +
                                 R"(,"annotations":)" + annotations + "}}")));
  }
  // The ConfigMap's kinformer.io/stamped-by ("" when it has none).
  std::string stamped_by(const std::string& ns, const std::string& name) {
    auto cm = client_.get(configmaps_, ns, name);
    if (!cm) return "<" + cm.error().message + ">";
    const std::string* value =
        client::find_value((*cm)->metadata.annotations, "kinformer.io/stamped-by");
    return value != nullptr ? *value : "";
  }
  static std::vector<std::string> args(const std::string& ns, const std::string& id, bool release) {
    std::vector<std::string> a = {"--namespace",  ns,           "--lease",
                                  "stamper",      "--identity", id,
                                  "--timestamps", "--workers",  "2"};
    if (release) a.emplace_back("--release-on-exit");
    return a;
  }
};

const char* const kStamp = R"({"kinformer.io/stamp":"true"})";

TEST_F(LeaseControllerE2E, OneOfTwoLeadsAndStampsAndTheOtherTakesOverWhenItIsKilled) {
  const std::string ns = create_namespace(client_, "examples-lease");
  create_configmap(ns, "labelled", kStamp);
  create_configmap(ns, "unlabelled", R"({"app":"x"})");
  create_configmap(ns, "stamped-already", kStamp, R"({"kinformer.io/stamped-by":"someone-else"})");

  Program a(LEASE_CONTROLLER_PATH, args(ns, "a", false));
  Program b(LEASE_CONTROLLER_PATH, args(ns, "b", false));
  ASSERT_TRUE(eventually([&] { return printed_at(a, "leading a") || printed_at(b, "leading b"); }))
      << a.out() << a.err() << b.out() << b.err();
  const bool a_leads = printed_at(a, "leading a").has_value();
  Program& leader = a_leads ? a : b;
  Program& other = a_leads ? b : a;
  const std::string l = a_leads ? "a" : "b";
  const std::string o = a_leads ? "b" : "a";
  // The other has read the Lease and follows.
  ASSERT_TRUE(eventually([&] { return printed_at(other, "new leader " + l).has_value(); }))
      << other.out() << other.err();
  ASSERT_TRUE(eventually([&] { return stamped_by(ns, "labelled") == l; }))
      << stamped_by(ns, "labelled") << leader.err();
  EXPECT_FALSE(printed_at(other, "leading " + o)) << other.out();
  EXPECT_EQ(other.err().find("lease_controller: stamped"), std::string::npos)
      << other.err();  // a follower

  const double killed_at = wall_now();
  leader.signal(SIGKILL);
  EXPECT_EQ(leader.wait(), 128);
  ASSERT_TRUE(eventually([&] { return printed_at(other, "leading " + o).has_value(); }, 60s))
      << other.out() << other.err();
  const double takeover = *printed_at(other, "leading " + o) - killed_at;
  std::printf("lease_controller takeover after kill -9 of the leader: %.2f s\n", takeover);
  RecordProperty("takeover_after_kill_ms", static_cast<int>(takeover * 1000));
  EXPECT_LT(takeover, 30.0);  // lease 15 s + retry 2 s; slack for a loaded machine

  create_configmap(ns, "late", kStamp);
  ASSERT_TRUE(eventually([&] { return stamped_by(ns, "late") == o; }))
      << stamped_by(ns, "late") << other.err();
  EXPECT_EQ(stamped_by(ns, "labelled"), l);  // stamped once, by the first leader
  EXPECT_EQ(stamped_by(ns, "stamped-already"), "someone-else");
  EXPECT_EQ(stamped_by(ns, "unlabelled"), "");
  EXPECT_FALSE(two_leaders(terms(leader, l, killed_at), terms(other, o, wall_now())))
      << leader.out() << other.out();

  other.signal(SIGTERM);
  EXPECT_EQ(other.wait(), 0) << other.err();
  ASSERT_FALSE(roles(other).empty());
  EXPECT_EQ(roles(other).back().role, "stopped leading " + o);
}

TEST_F(LeaseControllerE2E, SigtermWithReleaseOnExitHandsOverAtTheOthersNextTry) {
  const std::string ns = create_namespace(client_, "examples-lease");
  Program a(LEASE_CONTROLLER_PATH, args(ns, "a", true));
  Program b(LEASE_CONTROLLER_PATH, args(ns, "b", true));
  ASSERT_TRUE(eventually([&] { return printed_at(a, "leading a") || printed_at(b, "leading b"); }))
      << a.out() << a.err() << b.out() << b.err();
  const bool a_leads = printed_at(a, "leading a").has_value();
  Program& leader = a_leads ? a : b;
  Program& other = a_leads ? b : a;
  const std::string l = a_leads ? "a" : "b";
  const std::string o = a_leads ? "b" : "a";
  ASSERT_TRUE(eventually([&] { return printed_at(other, "new leader " + l).has_value(); }))
      << other.out() << other.err();
  create_configmap(ns, "first", kStamp);
  ASSERT_TRUE(eventually([&] { return stamped_by(ns, "first") == l; })) << leader.err();

  EXPECT_EQ(other.err().find("lease_controller: stamped"), std::string::npos)
      << other.err();  // a follower
  const double stopped_at = wall_now();
  leader.signal(SIGTERM);
  EXPECT_EQ(leader.wait(), 0) << leader.err();
  ASSERT_FALSE(roles(leader).empty());
  EXPECT_EQ(roles(leader).back().role, "stopped leading " + l);
  ASSERT_TRUE(eventually([&] { return printed_at(other, "leading " + o).has_value(); }, 60s))
      << other.out() << other.err();
  const double takeover = *printed_at(other, "leading " + o) - stopped_at;
  std::printf("lease_controller takeover after SIGTERM with --release-on-exit: %.2f s\n", takeover);
  RecordProperty("takeover_after_release_ms", static_cast<int>(takeover * 1000));
  EXPECT_LT(takeover, 30.0);  // retry 2 s (x 1.2 jitter); slack for a loaded machine

  create_configmap(ns, "second", kStamp);
  ASSERT_TRUE(eventually([&] { return stamped_by(ns, "second") == o; })) << other.err();
  EXPECT_EQ(stamped_by(ns, "first"), l);
  EXPECT_FALSE(two_leaders(terms(leader, l, wall_now()), terms(other, o, wall_now())))
      << leader.out() << other.out();
  other.signal(SIGTERM);
  EXPECT_EQ(other.wait(), 0) << other.err();
}

// Writes racing the stamps: a stamp whose resourceVersion went stale meanwhile gets a 409, and the
// key is retried until it lands. How many conflicts happen depends on timing; that every
// ConfigMap ends up stamped, and by the leader, does not.
TEST_F(LeaseControllerE2E, ConfigMapsWrittenWhileTheLeaderStampsAreAllStamped) {
  const std::string ns = create_namespace(client_, "examples-lease");
  Program a(LEASE_CONTROLLER_PATH, args(ns, "a", false));
  ASSERT_TRUE(eventually([&] { return printed_at(a, "leading a").has_value(); }))
      << a.out() << a.err();
  constexpr int kConfigMaps = 20;
  for (int i = 0; i < kConfigMaps; ++i) create_configmap(ns, "cm-" + std::to_string(i), kStamp);
  for (int round = 0; round < 5; ++round) {
    for (int i = 0; i < kConfigMaps; ++i) {
      ASSERT_TRUE(client_.patch(configmaps_, ns, "cm-" + std::to_string(i),
                                client::PatchType::merge,
                                R"({"data":{"round":")" + std::to_string(round) + R"("}})"));
    }
  }
  for (int i = 0; i < kConfigMaps; ++i) {
    const std::string name = "cm-" + std::to_string(i);
    ASSERT_TRUE(eventually([&] { return stamped_by(ns, name) == "a"; }, 60s))
        << name << ": " << stamped_by(ns, name) << a.err();
  }
  std::size_t conflicts = 0;
  std::istringstream err(a.err());
  for (std::string line; std::getline(err, line);)
    conflicts += line.find("reconcile failed") != std::string::npos &&
                 line.find(" 409") != std::string::npos;
  std::printf("lease_controller: %zu stamps retried after a 409\n", conflicts);
  a.signal(SIGTERM);
  EXPECT_EQ(a.wait(), 0) << a.err();
}

TEST_F(LeaseControllerE2E, UsageAndConfigurationErrorsExitWith2) {
  const std::vector<std::vector<std::string>> bad = {
      {},
      {"--namespace", "x", "--lease", "l"},
      {"--namespace", "x", "--identity", "i"},
      {"--lease", "l", "--identity", "i"},
      {"--namespace", "x", "--lease", "l", "--identity", "i", "--workers", "0"},
      {"--namespace", "x", "--lease", "l", "--identity", "i", "--workers", "two"},
      {"--namespace", "x", "--lease", "l", "--identity", "i", "--frobnicate"},
      {"--namespace", "x", "--lease", "l", "--identity"},
  };
  for (const auto& a : bad) {
    Program run(LEASE_CONTROLLER_PATH, a);
    EXPECT_EQ(run.wait(), 2) << run.err();
    EXPECT_NE(run.err().find("usage:"), std::string::npos) << run.err();
    EXPECT_EQ(run.out(), "");
  }
  Program unreadable(LEASE_CONTROLLER_PATH, {"--namespace", "x", "--lease", "l", "--identity", "i"},
                     {"KUBECONFIG=/nonexistent/kubeconfig"});
  EXPECT_EQ(unreadable.wait(), 2) << unreadable.err();
  EXPECT_NE(unreadable.err().find("/nonexistent/kubeconfig"), std::string::npos)
      << unreadable.err();
}
}  // namespace
}  // namespace kinformer::e2e
