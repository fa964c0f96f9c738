// The real `kwatch` binary against a real API server: audit counts exactly the watches a test
// opened, --max-watches exit codes, a cache dump equal to the server's list without secret
// values, and the demo's one-watch-per-resource (and its multiplication with --unshared).

#include <gtest/gtest.h>

#include <rapidjson/document.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <future>
#include <map>
#include <sstream>
#include <thread>

#include "e2e_env.h"

#ifndef KWATCH_PATH
#error "KWATCH_PATH must be defined (the kwatch binary)"
#endif

namespace kinformer::e2e {
namespace {

using namespace std::chrono_literals;

struct Run {
  int code = -1;
  std::string out;
  std::string err;
};

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs kwatch with `args` (KUBECONFIG from the environment); captures stdout and stderr.
Run kwatch(const std::vector<std::string>& args) {
  static int counter = 0;
  const std::string base =
      "/tmp/kwatch-e2e-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
  std::string cmd = quote(KWATCH_PATH);
  for (const auto& a : args) cmd += " " + quote(a);
  cmd += " >" + quote(base + ".out") + " 2>" + quote(base + ".err") + " </dev/null";
  const int rc = std::system(cmd.c_str());
  Run r;
  r.code = WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
  r.out = slurp(base + ".out");
  r.err = slurp(base + ".err");
  std::remove((base + ".out").c_str());
  std::remove((base + ".err").c_str());
  return r;
}

// resource -> count from `kwatch audit --json`.
std::map<std::string, long> audit_json(const Run& r) {
  rapidjson::Document doc;
  doc.Parse(r.out.c_str());
  EXPECT_FALSE(doc.HasParseError()) << r.out;
  std::map<std::string, long> out;
  if (doc.HasParseError() || !doc.IsObject()) return out;
  EXPECT_TRUE(doc["source"].IsString());
  for (const auto& e : doc["resources"].GetArray())
    out[e["resource"].GetString()] = e["count"].GetInt64();
  return out;
}

class KwatchE2E : public ::testing::Test {
 protected:
  KwatchE2E() : client_(admin_config(), fast_client_options()) {}
  client::RestClient client_;
};

TEST_F(KwatchE2E, AuditJsonCountsExactlyTheWatchesTheTestOpened) {
  const std::string ns = create_namespace(client_, "kwatch-audit");
  const long before = server_watches(client_, "secrets");
  const auto first = kwatch({"audit", "--json"});
  ASSERT_EQ(first.code, 0) << first.err;
  const long audited_before = audit_json(first)["secrets"];

  std::vector<client::WatchStreamPtr> watches;
  for (int i = 0; i < 3; ++i) {
    auto w = client_.watch(secrets(), ns, {});
    ASSERT_TRUE(w) << w.error().to_string();
    watches.push_back(std::move(*w));
  }
  ASSERT_EQ(wait_for_server_watches(client_, "secrets", before + 3), before + 3);

  const auto after = kwatch({"audit", "--json"});
  ASSERT_EQ(after.code, 0) << after.err;
  EXPECT_EQ(audit_json(after)["secrets"] - audited_before, 3) << after.out;

  const auto table = kwatch({"audit"});
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("apiserver_longrunning_requests"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("TOTAL"), std::string::npos) << table.out;
}

TEST_F(KwatchE2E, MaxWatchesExitsOneWhenExceededAndZeroOtherwise) {
  const std::string ns = create_namespace(client_, "kwatch-max");
  const long before = server_watches(client_, "secrets");
  std::vector<client::WatchStreamPtr> watches;
  for (int i = 0; i < 5; ++i) {
    auto w = client_.watch(secrets(), ns, {});
    ASSERT_TRUE(w) << w.error().to_string();
    watches.push_back(std::move(*w));
  }
  ASSERT_EQ(wait_for_server_watches(client_, "secrets", before + 5), before + 5);
  const auto counts = audit_json(kwatch({"audit", "--json"}));
  long most = 0;
  for (const auto& [resource, count] : counts) most = std::max(most, count);
  ASSERT_GE(most, 5);

  const auto exceeded =
      kwatch({"audit", "--max-watches", std::to_string(counts.at("secrets") - 1)});
  EXPECT_EQ(exceeded.code, 1) << exceeded.err;
  EXPECT_NE(exceeded.err.find("resource=secrets"), std::string::npos) << exceeded.err;

  const auto fine = kwatch({"audit", "--max-watches", std::to_string(most + 10)});
  EXPECT_EQ(fine.code, 0) << fine.err;
}

TEST_F(KwatchE2E, AuditWithoutPermissionExitsTwo) {
  if (!restricted_config())
    GTEST_SKIP() << "KUBECONFIG has no 'restricted' context (the embedded launcher's has)";
  const auto r = kwatch({"audit", "--context", "restricted"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no permission to read /metrics"), std::string::npos) << r.err;
  const auto c = kwatch({"cache", "--resource", "secrets", "--context", "restricted",
                         "--until-synced", "--timeout", "20"});
  EXPECT_EQ(c.code, 2);
  EXPECT_NE(c.err.find("forbidden"), std::string::npos) << c.err;
}

TEST_F(KwatchE2E, CacheDumpAfterChurnEqualsTheServerAndHidesSecretValues) {
  const std::string ns = create_namespace(client_, "kwatch-cache");
  // "s3cr3t-value" and "another-secret" in base64.
  const std::string v1 = "czNjcjN0LXZhbHVl", v2 = "YW5vdGhlci1zZWNyZXQ=";
  for (int i = 0; i < 12; ++i) {
    const std::string name = "s" + std::to_string(i);
    auto created = client_.create(
        secrets(), *object(ns, name,
                           R"({"apiVersion":"v1","kind":"Secret","metadata":{"name":")" + name +
                               R"("},"data":{"password":")" + v1 +
                               R"("},"stringData":{"other":"plain-secret-text"}})"));
    ASSERT_TRUE(created) << created.error().to_string();
  }
  for (int i = 0; i < 12; i += 3) {
    auto patched = client_.patch(secrets(), ns, "s" + std::to_string(i), client::PatchType::merge,
                                 R"({"data":{"password":")" + v2 + R"("}})");
    ASSERT_TRUE(patched) << patched.error().to_string();
  }
  for (int i = 1; i < 12; i += 4)
    ASSERT_TRUE(client_.delete_(secrets(), ns, "s" + std::to_string(i)));

  auto listed = client_.list_all(secrets(), ns);
  ASSERT_TRUE(listed) << listed.error().to_string();
  std::map<std::string, std::string> server;
  for (const auto& o : listed->items) server[o->metadata.uid.str()] = o->metadata.resource_version;
  ASSERT_EQ(server.size(), 9u);

  const std::string file = "/tmp/kwatch-e2e-dump-" + std::to_string(getpid()) + ".jsonl";
  std::map<std::string, std::string> dumped;
  std::string text;
  // The informer's first list is served from the watch cache (resourceVersion "0"), which may
  // trail the consistent list above by a moment.
  for (int attempt = 0; attempt < 10 && dumped != server; ++attempt) {
    const auto r =
        kwatch({"cache", "--resource", "secrets", "-n", ns, "--until-synced", "--dump", file});
    ASSERT_EQ(r.code, 0) << r.err;
    text = slurp(file);
    dumped.clear();
    std::vector<std::string> names;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      rapidjson::Document doc;
      doc.Parse(line.c_str());
      ASSERT_FALSE(doc.HasParseError()) << line;
      const auto& meta = doc["metadata"];
      dumped[meta["uid"].GetString()] = meta["resourceVersion"].GetString();
      names.push_back(meta["name"].GetString());
    }
    EXPECT_TRUE(std::is_sorted(names.begin(), names.end())) << text;
    if (dumped != server) std::this_thread::sleep_for(200ms);
  }
  EXPECT_EQ(dumped, server) << text;
  EXPECT_EQ(text.find(v1), std::string::npos) << text;
  EXPECT_EQ(text.find(v2), std::string::npos) << text;
  EXPECT_EQ(text.find("plain-secret-text"), std::string::npos) << text;
  EXPECT_NE(text.find("<redacted>"), std::string::npos) << text;
  std::remove(file.c_str());
}

TEST_F(KwatchE2E, DemoSharesOneServerWatchPerResourceAcrossFiftyComponents) {
  const auto r = kwatch({"demo", "--components", "50", "--duration", "10"});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("verdict: OK"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(secrets=1 pods=1 endpointslices=1)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("caches match the server"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("50 components, 150 handlers"), std::string::npos) << r.out;
}

TEST_F(KwatchE2E, DemoUnsharedShowsFiftyWatchesPerResource) {
  const auto r = kwatch({"demo", "--unshared", "--components", "50", "--duration", "5"});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("verdict: MULTIPLIED"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(secrets=50 pods=50 endpointslices=50)"), std::string::npos) << r.out;
}

// kwatch cache through a proxy the test cuts: a line when the cache turns stale (nothing from the
// server past the watch idle deadline, 3 s here), and one when it is fresh again after the cut
// heals. kwatch runs in the background and is stopped by `timeout` (SIGTERM) at the end.
TEST_F(KwatchE2E, CacheSaysWhenItTurnsStaleAndWhenItIsFreshAgain) {
  const std::string ns = create_namespace(client_, "kwatch-fresh");
  TcpProxy proxy(admin_config().server);
  // The same kubeconfig, its servers pointed at the proxy.
  std::string kubeconfig = slurp(std::getenv("KUBECONFIG"));
  const std::string server = admin_config().server;
  for (auto at = kubeconfig.find(server); at != std::string::npos;
       at = kubeconfig.find(server, at)) {
    kubeconfig.replace(at, server.size(), proxy.url());
  }
  const std::string base = "/tmp/kwatch-e2e-fresh-" + std::to_string(getpid());
  {
    std::ofstream out(base + ".kubeconfig");
    out << kubeconfig;
  }
  // Its pid goes to a file, so that the test can stop it (`timeout` forwards the SIGTERM).
  const std::string cmd = "KUBECONFIG=" + quote(base + ".kubeconfig") + " timeout 90 " +
                          quote(KWATCH_PATH) + " cache --resource secrets -n " + quote(ns) +
                          " --events --watch-idle-timeout 3 >/dev/null 2>" + quote(base + ".err") +
                          " & echo $! >" + quote(base + ".pid") + "; wait $!";
  auto done = std::async(std::launch::async, [&] { return std::system(cmd.c_str()); });
  auto logged = [&](const std::string& what) {
    return eventually([&] { return slurp(base + ".err").find(what) != std::string::npos; }, 30s);
  };
  ASSERT_TRUE(logged("msg=\"cache synced\"")) << slurp(base + ".err");
  proxy.cut();
  EXPECT_TRUE(logged("msg=\"cache stale: nothing from the server within the idle deadline\""))
      << slurp(base + ".err");
  proxy.heal();
  EXPECT_TRUE(logged("msg=\"cache fresh again\"")) << slurp(base + ".err");
  ASSERT_TRUE(eventually([&] { return !slurp(base + ".pid").empty(); }));
  ::kill(static_cast<pid_t>(std::stol(slurp(base + ".pid"))), SIGTERM);
  done.wait();
  std::remove((base + ".pid").c_str());
  std::remove((base + ".err").c_str());
  std::remove((base + ".kubeconfig").c_str());
}

TEST_F(KwatchE2E, UsageErrorsExitTwo) {
  const auto r = kwatch({"cache", "--resource", "frobs"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("unknown resource 'frobs'"), std::string::npos) << r.err;
  const auto g = kwatch({"cache", "--resource", "apps/v1/frobs", "--until-synced"});
  EXPECT_EQ(g.code, 2);
  EXPECT_NE(g.err.find("unknown resource 'apps/v1/frobs'"), std::string::npos) << g.err;
}

}  // namespace
}  // namespace kinformer::e2e
