// The programs in examples/ against a real API server: each is run as a user would run it
// (KUBECONFIG from the environment, through ClusterConfig::load_default) and its output checked.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "e2e_env.h"

#if !defined(CERT_DISTRIBUTOR_PATH) || !defined(ENDPOINT_PUBLISHER_PATH)
#error "CERT_DISTRIBUTOR_PATH and ENDPOINT_PUBLISHER_PATH must be defined (the examples' binaries)"
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

}  // namespace
}  // namespace kinformer::e2e
