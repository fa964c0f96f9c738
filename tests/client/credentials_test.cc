// The credential providers: token files (rotation) and exec plugins (expiry, timeout, versions,
// client certificates, PATH lookup).
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <future>
#include <sstream>
#include <thread>

#include "fake_apiserver.h"
#include "kinformer/client/cluster_config.h"
#include "kinformer/client/rest_client.h"
#include "temp_files.h"

namespace kinformer::client {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::TempDir;

constexpr const char* kV1 = "client.authentication.k8s.io/v1";
constexpr const char* kV1beta1 = "client.authentication.k8s.io/v1beta1";

ExecConfig exec_config(const std::string& command, std::string api_version = kV1) {
  ExecConfig c;
  c.api_version = std::move(api_version);
  c.command = command;
  c.origin = "test";
  return c;
}

// True once `pid` no longer runs: gone, or a zombie waiting for whoever reaps orphans.
bool process_gone(pid_t pid) {
  if (::kill(pid, 0) != 0) return errno == ESRCH;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z';
}

bool eventually_gone(pid_t pid) {
  for (int i = 0; i < 500; ++i) {
    if (process_gone(pid)) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

// The lines of `env` (NUL-separated, as in /proc/PID/environ) that set `name`.
std::vector<std::string> entries(const std::string& env, const std::string& name) {
  std::vector<std::string> out;
  std::istringstream in(env);
  for (std::string e; std::getline(in, e, '\0');) {
    if (e.starts_with(name + "=")) out.push_back(e);
  }
  return out;
}

// --- token file -----------------------------------------------------------------------------

// The provider notices a rotation by the file's inode, size and mtime. These rotations keep the
// size, so a provider that looked at the size alone would keep serving the old token.
TEST(TokenFile, SameSizeRotationByRenameIsReRead) {
  TempDir dir;
  auto path = dir.write("token", "aaaa");
  auto provider = token_file_credentials(path);
  ASSERT_EQ(provider->current()->token, "aaaa");
  dir.write("token.new", "bbbb");  // kubelet's way: a new file swapped in
  fs::rename(dir.path + "/token.new", path);
  auto c = provider->current();
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->token, "bbbb");
}

TEST(TokenFile, SameSizeRewriteInPlaceIsReRead) {
  TempDir dir;
  auto path = dir.write("token", "aaaa");
  struct stat before {};
  ASSERT_EQ(::stat(path.c_str(), &before), 0);
  auto provider = token_file_credentials(path);
  ASSERT_EQ(provider->current()->token, "aaaa");
  dir.write("token", "bbbb");  // same inode, same size
  // The write happened later than the first one; say so explicitly, since two writes within one
  // filesystem timestamp tick can carry the same mtime.
  timespec times[2] = {before.st_atim, before.st_mtim};
  times[1].tv_sec += 1;
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
  struct stat after {};
  ASSERT_EQ(::stat(path.c_str(), &after), 0);
  ASSERT_EQ(after.st_ino, before.st_ino);
  ASSERT_EQ(after.st_size, before.st_size);
  auto c = provider->current();
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->token, "bbbb");
}

// --- exec plugin ----------------------------------------------------------------------------

TEST(ExecPlugin, ReRunOnceTheCachedCredentialExpired) {
  TempDir dir;
  auto plugin = testing::write_plugin(dir);
  auto provider = exec_credentials(exec_config(plugin));
  auto now = std::chrono::system_clock::now();

  // Already expired when it arrives: every current() has to run the plugin again.
  dir.write("out.json",
            testing::exec_credential(kV1, R"({"token":"tok-@N@","expirationTimestamp":")" +
                                              testing::rfc3339(now - 60s) + R"("})"));
  auto first = provider->current();
  ASSERT_TRUE(first) << first.error().to_string();
  EXPECT_EQ(first->token, "tok-1");
  ASSERT_TRUE(first->expiry);
  EXPECT_LT(*first->expiry, now);
  auto second = provider->current();
  ASSERT_TRUE(second) << second.error().to_string();
  EXPECT_EQ(second->token, "tok-2");
  EXPECT_EQ(testing::plugin_runs(dir), 2);

  // Valid for an hour: the next run's credential is cached.
  dir.write("out.json",
            testing::exec_credential(kV1, R"({"token":"tok-@N@","expirationTimestamp":")" +
                                              testing::rfc3339(now + 1h) + R"("})"));
  EXPECT_EQ(provider->current()->token, "tok-3");
  EXPECT_EQ(provider->current()->token, "tok-3");
  EXPECT_EQ(testing::plugin_runs(dir), 3);
}

TEST(ExecPlugin, HangingPluginIsKilledAtTheTimeout) {
  TempDir dir;
  auto plugin = dir.write("hang.sh",
                          "#!/bin/sh\n"
                          "d=$(dirname \"$0\")\n"
                          "echo $$ > \"$d/pid\"\n"
                          "sleep 6\n"
                          "echo done > \"$d/finished\"\n");
  ExecConfig config = exec_config(plugin);
  config.timeout = 2s;
  auto provider = exec_credentials(config);
  auto r = provider->current();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::auth);
  EXPECT_NE(r.error().message.find("timed out after 2s"), std::string::npos) << r.error().message;
  // Killed, not waited for: it never got to its last line, and it is gone (reaped).
  EXPECT_FALSE(dir.exists("finished"));
  std::string pid = dir.read("pid");
  ASSERT_FALSE(pid.empty()) << "the plugin did not start within its 2 s";
  EXPECT_EQ(::kill(static_cast<pid_t>(std::stol(pid)), 0), -1);
  EXPECT_EQ(errno, ESRCH);
}

// kubectl's order: the inherited environment, then kubeconfig's exec.env, then
// KUBERNETES_EXEC_INFO; a later value replaces an earlier one, so the child sees each name once.
// The plugin records the environment block it was started with (/proc/$$/environ, before the
// shell could merge duplicates): getenv() in a plugin takes the first of duplicate entries.
TEST(ExecPlugin, KubeconfigEnvAndExecInfoOverrideTheInheritedEnvironment) {
  TempDir dir;
  auto plugin = dir.write("plugin.sh",
                          "#!/bin/sh\n"
                          "d=$(dirname \"$0\")\n"
                          "cat /proc/$$/environ > \"$d/environ\"\n"
                          "cat \"$d/out.json\"\n");
  dir.write("out.json", testing::exec_credential(kV1, R"({"token":"t"})"));
  testing::ScopedEnv profile("AWS_PROFILE", "dev");
  testing::ScopedEnv stale("KUBERNETES_EXEC_INFO", R"({"stale":true})");
  ExecConfig config = exec_config(plugin);
  config.env = {{"AWS_PROFILE", "prod"}, {"KINFORMER_TEST_X", "1"}, {"KINFORMER_TEST_X", "2"}};
  auto c = exec_credentials(config)->current();
  ASSERT_TRUE(c) << c.error().to_string();
  std::string env = dir.read("environ");
  ASSERT_FALSE(env.empty());
  EXPECT_EQ(entries(env, "AWS_PROFILE"), std::vector<std::string>{"AWS_PROFILE=prod"});
  EXPECT_EQ(entries(env, "KINFORMER_TEST_X"), std::vector<std::string>{"KINFORMER_TEST_X=2"});
  auto info = entries(env, "KUBERNETES_EXEC_INFO");
  ASSERT_EQ(info.size(), 1u) << env;
  EXPECT_NE(info[0].find(R"("kind":"ExecCredential")"), std::string::npos) << info[0];
  EXPECT_FALSE(entries(env, "PATH").empty());  // the rest is still inherited
}

// A plugin that prints its credential, closes its output and then keeps running: the deadline
// covers the whole run, so the provider does not wait for it, and the plugin's process group
// (the shell and its `sleep`) is killed.
TEST(ExecPlugin, PluginThatHangsAfterClosingItsOutputIsKilledAtTheDeadline) {
  TempDir dir;
  auto plugin = dir.write("plugin.sh",
                          "#!/bin/sh\n"
                          "d=$(dirname \"$0\")\n"
                          "echo $$ > \"$d/pid\"\n"
                          "cat \"$d/out.json\"\n"
                          "exec >&-\n"
                          "sleep 30 &\n"
                          "echo $! > \"$d/sleep-pid\"\n"
                          "wait\n");
  dir.write("out.json", testing::exec_credential(kV1, R"({"token":"TOPSECRET"})"));
  ExecConfig config = exec_config(plugin);
  config.timeout = 1s;
  auto provider = exec_credentials(config);
  auto result = std::async(std::launch::async, [&] { return provider->current(); });
  // Only proves that it did not hang: the plugin would run for 30 s.
  ASSERT_EQ(result.wait_for(20s), std::future_status::ready);
  auto r = result.get();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::auth);
  EXPECT_NE(r.error().message.find("exec plugin " + plugin + ": timed out after 1s"),
            std::string::npos)
      << r.error().message;
  EXPECT_EQ(r.error().message.find("TOPSECRET"), std::string::npos);
  std::string pid = dir.read("pid");
  std::string sleep_pid = dir.read("sleep-pid");
  ASSERT_FALSE(pid.empty());
  ASSERT_FALSE(sleep_pid.empty());
  EXPECT_TRUE(eventually_gone(static_cast<pid_t>(std::stol(pid))));
  EXPECT_TRUE(eventually_gone(static_cast<pid_t>(std::stol(sleep_pid))));
}

TEST(ExecPlugin, V1beta1ThroughKubeconfig) {
  TempDir dir;
  dir.write("plugin.sh",
            "#!/bin/sh\n"
            "d=$(dirname \"$0\")\n"
            "printf '%s' \"$KUBERNETES_EXEC_INFO\" > \"$d/exec-info\"\n"
            "cat \"$d/out.json\"\n");
  dir.write("out.json", testing::exec_credential(kV1beta1, R"({"token":"beta-token"})"));
  auto path = dir.write("config",
                        "current-context: ctx\n"
                        "clusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:6443\n"
                        "contexts:\n- name: ctx\n  context:\n    cluster: c\n    user: u\n"
                        "users:\n- name: u\n  user:\n    exec:\n"
                        "      apiVersion: client.authentication.k8s.io/v1beta1\n"
                        "      command: ./plugin.sh\n");
  KubeconfigOptions o;
  o.path = path;
  ClusterConfig config = ClusterConfig::from_kubeconfig(o);
  auto c = config.credentials->current();
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->token, "beta-token");
  EXPECT_NE(dir.read("exec-info").find(R"("apiVersion":"client.authentication.k8s.io/v1beta1")"),
            std::string::npos)
      << dir.read("exec-info");
}

TEST(ExecPlugin, ApiVersionMismatchIsRejected) {
  TempDir dir;
  auto plugin = testing::write_plugin(dir);
  dir.write("out.json", testing::exec_credential(kV1beta1, R"({"token":"TOPSECRET"})"));
  auto r = exec_credentials(exec_config(plugin, kV1))->current();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::auth);
  EXPECT_NE(r.error().message.find("test: exec plugin " + plugin + ": output apiVersion '" +
                                   std::string(kV1beta1) + "' does not match the configured '" +
                                   kV1 + "'"),
            std::string::npos)
      << r.error().message;
  EXPECT_EQ(r.error().message.find("TOPSECRET"), std::string::npos);
}

// The server only accepts clients with a certificate from its CA: the request succeeds only if
// the certificate and key the plugin returned are presented in the TLS handshake.
TEST(ExecPlugin, ClientCertificateFromThePluginIsUsed) {
  testing::FakeApiServerOptions server_options;
  server_options.tls = true;
  server_options.require_client_cert = true;
  testing::FakeApiServer server(std::move(server_options));
  server.on("GET", "/x", [](const testing::Request&) { return testing::Reply::text("ok"); });
  TempDir dir;
  auto plugin = testing::write_plugin(dir);
  dir.write("out.json", testing::exec_credential(
                            kV1, R"({"token":"plugin-token","clientCertificateData":")" +
                                     testing::json_escape(server.pki().client.cert_pem) +
                                     R"(","clientKeyData":")" +
                                     testing::json_escape(server.pki().client.key_pem) + R"("})"));
  auto provider = exec_credentials(exec_config(plugin));
  auto c = provider->current();
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->client_cert_pem, server.pki().client.cert_pem);
  EXPECT_EQ(c->client_key_pem, server.pki().client.key_pem);

  RestClientOptions options;
  options.rate_limit.qps = 0;
  options.request_timeout = 5s;
  RestClient client(server.cluster_config(provider), options);
  auto r = client.get_raw("/x");
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(r->status, 200);
  ASSERT_EQ(server.request_count(), 1u);
  EXPECT_EQ(server.requests()[0].header("authorization"), "Bearer plugin-token");
}

// A bare command name is looked up through PATH (kubectl), not next to the kubeconfig.
TEST(ExecPlugin, BareCommandIsFoundThroughPath) {
  TempDir bin;
  TempDir home;
  testing::write_plugin(bin, "kinformer-test-credential-plugin");
  bin.write("out.json", testing::exec_credential(kV1, R"({"token":"from-path"})"));
  auto path = home.write("config",
                         "current-context: ctx\n"
                         "clusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:6443\n"
                         "contexts:\n- name: ctx\n  context:\n    cluster: c\n    user: u\n"
                         "users:\n- name: u\n  user:\n    exec:\n"
                         "      apiVersion: client.authentication.k8s.io/v1\n"
                         "      command: kinformer-test-credential-plugin\n");
  const char* old_path = std::getenv("PATH");
  testing::ScopedEnv env("PATH", bin.path + ":" + (old_path ? old_path : "/usr/bin:/bin"));
  KubeconfigOptions o;
  o.path = path;
  auto c = ClusterConfig::from_kubeconfig(o).credentials->current();
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->token, "from-path");
  EXPECT_EQ(testing::plugin_runs(bin), 1);
}

}  // namespace
}  // namespace kinformer::client
