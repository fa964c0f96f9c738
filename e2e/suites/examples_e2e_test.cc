// The programs in examples/ against a real API server: each is run as a user would run it
// (KUBECONFIG from the environment, through ClusterConfig::load_default) and its output checked.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "e2e_env.h"
#include "kinformer/controller/lease_lock.h"

#if !defined(CERT_DISTRIBUTOR_PATH) || !defined(ENDPOINT_PUBLISHER_PATH) || \
    !defined(LEADER_RECONCILER_PATH)
#error "CERT_DISTRIBUTOR_PATH, ENDPOINT_PUBLISHER_PATH and LEADER_RECONCILER_PATH must be defined"
#endif

namespace kinformer::e2e {
namespace {

using namespace std::chrono_literals;

// One run of an example, stdout and stderr to files, polled while it runs.
class Program {
 public:
  Program(const std::string& path, const std::vector<std::string>& args) {
    static int counter = 0;
    base_ = "/tmp/examples-e2e-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close_range(3, ~0U, 0);  // none of this process's sockets
      const int out = ::open((base_ + ".out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      const int err = ::open((base_ + ".err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      ::dup2(out, 1);
      ::dup2(err, 2);
      std::vector<char*> argv{const_cast<char*>(path.c_str())};
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(path.c_str(), argv.data());
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

TEST_F(ExamplesE2E, LeaderReconcilerReconcilesOnlyWhileLeadingAndHandsOverOnSigterm) {
  const std::string ns = create_namespace(client_, "examples-leader");
  const auto configmaps = client::dynamic_resource({"", "v1", "configmaps", "ConfigMap", true});
  ASSERT_TRUE(client_.create(
      configmaps,
      *object(
          ns, "settings",
          R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"settings","namespace":")" +
              ns + R"("},"data":{"k":"v"}})")));
  const std::string reconciled = "reconcile " + ns + "/settings";
  const std::vector<std::string> fast = {"--namespace", ns, "--lease-seconds", "3", "--identity"};
  auto args = [&](const std::string& id) {
    auto a = fast;
    a.push_back(id);
    return a;
  };

  Program a(LEADER_RECONCILER_PATH, args("a"));
  ASSERT_TRUE(eventually([&] { return a.printed(reconciled); })) << a.out() << a.err();
  EXPECT_TRUE(a.printed("leading"));
  Program b(LEADER_RECONCILER_PATH, args("b"));
  ASSERT_TRUE(eventually([&] { return b.printed("new leader a"); })) << b.out() << b.err();
  // While a leads and renews, b waits: it neither leads nor reconciles.
  std::optional<controller::MicroTime> renewed;
  int renewals = 0;
  ASSERT_TRUE(eventually([&] {
    auto lease = client_.get(controller::lease_resource(), ns, "leader-reconciler");
    if (!lease) return false;
    auto record = controller::lease_record_from_json(
        std::static_pointer_cast<const client::DynamicObject>(*lease)->json);
    if (!record || record->holder_identity != "a") return false;
    if (record->renew_time != renewed) {
      renewed = record->renew_time;
      ++renewals;
    }
    return renewals >= 3;
  }));
  EXPECT_FALSE(b.printed("leading")) << b.out();
  EXPECT_FALSE(b.printed(reconciled)) << b.out();

  a.signal(SIGTERM);
  EXPECT_EQ(a.wait(), 0) << a.err();
  EXPECT_EQ(a.lines().back(), "stopped leading");
  ASSERT_TRUE(eventually([&] { return b.printed(reconciled); })) << b.out() << b.err();
  EXPECT_TRUE(b.printed("new leader b"));
  ASSERT_TRUE(client_.delete_(configmaps, ns, "settings"));
  ASSERT_TRUE(eventually([&] { return b.printed(reconciled + " (deleted)"); })) << b.out();
  b.signal(SIGTERM);
  EXPECT_EQ(b.wait(), 0) << b.err();
}

}  // namespace
}  // namespace kinformer::e2e
