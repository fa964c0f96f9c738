#include "kinformer/client/cluster_config.h"

#include <gtest/gtest.h>

#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <fstream>

#include "base64.h"
#include "certs.h"
#include "temp_files.h"

namespace kinformer::client {
namespace {

namespace fs = std::filesystem;

using testing::base64;

using testing::TempDir;

std::string kubeconfig(const std::string& cluster, const std::string& user,
                       const std::string& current = "ctx", const std::string& name = "") {
  return "apiVersion: v1\nkind: Config\ncurrent-context: " + current + "\nclusters:\n- name: c" +
         name + "\n  cluster:\n" + cluster + "contexts:\n- name: ctx" + name +
         "\n  context:\n    cluster: c" + name + "\n    user: u" + name + "\n    namespace: team" +
         name + "\nusers:\n- name: u" + name + "\n  user:\n" + user;
}

const std::string kServer = "    server: https://127.0.0.1:6443\n";

std::string message_of(const KubeconfigOptions& o) {
  try {
    ClusterConfig::from_kubeconfig(o);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

KubeconfigOptions at(const std::string& path) {
  KubeconfigOptions o;
  o.path = path;
  return o;
}

TEST(Kubeconfig, TokenAndCaData) {
  TempDir dir;
  auto pki = testing::make_pki();
  auto path = dir.write(
      "config", kubeconfig(kServer + "    certificate-authority-data: " + base64(pki.ca.cert_pem) +
                               "\n    tls-server-name: api.internal\n",
                           "    token: s3cr3t-token\n"));
  ClusterConfig c = ClusterConfig::from_kubeconfig(at(path));
  EXPECT_EQ(c.server, "https://127.0.0.1:6443");
  EXPECT_EQ(c.ca_pem, pki.ca.cert_pem);
  EXPECT_EQ(c.tls_server_name, "api.internal");
  EXPECT_EQ(c.context, "ctx");
  EXPECT_EQ(c.namespace_, "team");
  ASSERT_TRUE(c.credentials);
  EXPECT_EQ(c.credentials->current()->token, "s3cr3t-token");
}

TEST(Kubeconfig, ClientCertFilesRelativeToKubeconfigFolder) {
  TempDir dir;
  auto pki = testing::make_pki();
  dir.write("sub/pki/ca.crt", pki.ca.cert_pem);
  dir.write("sub/pki/client.crt", pki.client.cert_pem);
  dir.write("sub/pki/client.key", pki.client.key_pem);
  auto path = dir.write(
      "sub/config",
      kubeconfig(kServer + "    certificate-authority: pki/ca.crt\n",
                 "    client-certificate: pki/client.crt\n    client-key: pki/client.key\n"));
  ClusterConfig c = ClusterConfig::from_kubeconfig(at(path));
  EXPECT_EQ(c.ca_pem, pki.ca.cert_pem);
  auto creds = c.credentials->current();
  ASSERT_TRUE(creds);
  EXPECT_EQ(creds->client_cert_pem, pki.client.cert_pem);
  EXPECT_EQ(creds->client_key_pem, pki.client.key_pem);
}

TEST(Kubeconfig, ClientCertData) {
  TempDir dir;
  auto pki = testing::make_pki();
  auto path = dir.write(
      "config", kubeconfig(kServer + "    insecure-skip-tls-verify: true\n",
                           "    client-certificate-data: " + base64(pki.client.cert_pem) +
                               "\n    client-key-data: " + base64(pki.client.key_pem) + "\n"));
  ClusterConfig c = ClusterConfig::from_kubeconfig(at(path));
  EXPECT_TRUE(c.insecure_skip_tls_verify);
  EXPECT_EQ(c.credentials->current()->client_key_pem, pki.client.key_pem);
}

TEST(Kubeconfig, TokenFileIsReReadWhenRotated) {
  TempDir dir;
  dir.write("token", "first\n");
  auto path = dir.write("config", kubeconfig(kServer, "    tokenFile: token\n"));
  ClusterConfig c = ClusterConfig::from_kubeconfig(at(path));
  EXPECT_EQ(c.credentials->current()->token, "first");
  // Rotation the way kubelet does it: a new file swapped in atomically.
  dir.write("token.new", "second-longer\n");
  fs::rename(dir.path + "/token.new", dir.path + "/token");
  EXPECT_EQ(c.credentials->current()->token, "second-longer");
}

TEST(Kubeconfig, MultiFileMergeFirstWins) {
  TempDir dir;
  auto a =
      dir.write("a", kubeconfig("    server: https://a.example:443\n", "    token: ta\n", "ctx"));
  auto b = dir.write(
      "b", kubeconfig("    server: https://b.example:443\n", "    token: tb\n", "ctxB", "B") +
               "- name: u\n  user:\n    token: ignored\n");
  KubeconfigOptions o;
  o.kubeconfig_env = a + ":" + dir.path + "/missing:" + b;
  ClusterConfig c = ClusterConfig::from_kubeconfig(o);
  EXPECT_EQ(c.context, "ctx");  // current-context from the first file
  EXPECT_EQ(c.server, "https://a.example:443");
  EXPECT_EQ(c.credentials->current()->token, "ta");  // user 'u' from the first file wins
  o.context = "ctxB";                                // an entry only the second file has
  ClusterConfig cb = ClusterConfig::from_kubeconfig(o);
  EXPECT_EQ(cb.server, "https://b.example:443");
  EXPECT_EQ(cb.credentials->current()->token, "tb");
  o.kubeconfig_env = b + ":" + a;
  o.context.reset();
  EXPECT_EQ(ClusterConfig::from_kubeconfig(o).context, "ctxB");
}

TEST(Kubeconfig, ExecPluginV1WithEnvArgsAndExpiry) {
  TempDir dir;
  dir.write(
      "plugin.sh",
      "#!/bin/sh\n"
      "echo \"$@\" >> \"$(dirname \"$0\")/runs\"\n"
      "cat <<EOT\n"
      "{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\","
      "\"status\":{\"token\":\"exec-$MY_ENV\",\"expirationTimestamp\":\"2099-01-01T00:00:00Z\"}}\n"
      "EOT\n");
  auto path = dir.write("config",
                        kubeconfig(kServer,
                                   "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
                                   "      command: ./plugin.sh\n      args: [get-token, --x]\n"
                                   "      env:\n      - name: MY_ENV\n        value: hello\n"
                                   "      interactiveMode: Never\n"));
  ClusterConfig c = ClusterConfig::from_kubeconfig(at(path));
  auto creds = c.credentials->current();
  ASSERT_TRUE(creds) << creds.error().to_string();
  EXPECT_EQ(creds->token, "exec-hello");
  ASSERT_TRUE(creds->expiry);
  EXPECT_TRUE(c.credentials->current());  // cached until expiry: no second run
  std::ifstream runs(dir.path + "/runs");
  std::string all((std::istreambuf_iterator<char>(runs)), {});
  EXPECT_EQ(all, "get-token --x\n");
  c.credentials->invalidate();  // a 401: run again
  ASSERT_TRUE(c.credentials->current());
  std::ifstream runs2(dir.path + "/runs");
  std::string all2((std::istreambuf_iterator<char>(runs2)), {});
  EXPECT_EQ(all2, "get-token --x\nget-token --x\n");
}

TEST(Kubeconfig, ExecPluginFailureIsAuthError) {
  TempDir dir;
  dir.write("bad.sh", "#!/bin/sh\necho 'not json'\nexit 3\n");
  auto path = dir.write(
      "config", kubeconfig(kServer,
                           "    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n"
                           "      command: ./bad.sh\n"));
  ClusterConfig c = ClusterConfig::from_kubeconfig(at(path));
  auto r = c.credentials->current();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::auth);
  EXPECT_NE(r.error().message.find("exited with status 3"), std::string::npos) << r.error().message;
}

// ---- kubeconfig data (a Secret's value): untrusted input, inline fields only by default ----

TEST(KubeconfigData, InlineFieldsLoadFromMemory) {
  auto pki = testing::make_pki();
  std::string yaml = kubeconfig(
      kServer + "    certificate-authority-data: " + base64(pki.ca.cert_pem) + "\n",
      "    token: s3cr3t-token\n    client-certificate-data: " + base64(pki.client.cert_pem) +
          "\n    client-key-data: " + base64(pki.client.key_pem) + "\n");
  ClusterConfig c =
      ClusterConfig::from_kubeconfig_data(yaml, {.origin = "secret ns/remotes, key 'west'"});
  EXPECT_EQ(c.server, "https://127.0.0.1:6443");
  EXPECT_EQ(c.ca_pem, pki.ca.cert_pem);
  EXPECT_EQ(c.namespace_, "team");
  ASSERT_TRUE(c.credentials);
  auto creds = c.credentials->current();
  ASSERT_TRUE(creds);
  EXPECT_EQ(creds->token, "s3cr3t-token");
  EXPECT_EQ(creds->client_cert_pem, pki.client.cert_pem);
}

struct RefusedCase {
  std::string cluster_extra;  // appended to the cluster entry
  std::string user;           // the user entry
  std::string field;          // what KubeconfigRefused::field() must say
  std::string value;          // must not appear in the message
};

class KubeconfigDataRefused : public ::testing::TestWithParam<RefusedCase> {};

TEST_P(KubeconfigDataRefused, ByDefaultNamingOriginEntryAndFieldNeverTheValue) {
  const RefusedCase& c = GetParam();
  std::string yaml =
      kubeconfig(kServer + c.cluster_extra, c.user.empty() ? "    token: t0k3n\n" : c.user);
  try {
    ClusterConfig::from_kubeconfig_data(yaml, {.origin = "secret ns/remotes, key 'west'"});
    FAIL() << "accepted " << c.field;
  } catch (const KubeconfigRefused& e) {
    std::string m = e.what();
    EXPECT_EQ(e.field(), c.field);
    EXPECT_NE(m.find("secret ns/remotes, key 'west'"), std::string::npos) << m;
    EXPECT_NE(m.find(c.field + " is refused"), std::string::npos) << m;
    EXPECT_EQ(m.find(c.value), std::string::npos) << m;
    EXPECT_EQ(m.find("t0k3n"), std::string::npos) << m;
  }
}

INSTANTIATE_TEST_SUITE_P(
    EachField, KubeconfigDataRefused,
    ::testing::Values(
        RefusedCase{"",
                    "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: "
                    "/bin/evil-plugin\n",
                    "exec", "/bin/evil-plugin"},
        RefusedCase{"", "    auth-provider:\n      name: gcp-secret-provider\n", "auth-provider",
                    "gcp-secret-provider"},
        RefusedCase{"", "    tokenFile: /etc/secret-token-path\n", "tokenFile",
                    "/etc/secret-token-path"},
        RefusedCase{"    certificate-authority: /etc/secret-ca-path\n", "", "certificate-authority",
                    "/etc/secret-ca-path"},
        RefusedCase{"",
                    "    client-certificate: /etc/secret-cert-path\n    client-key-data: a2V5\n",
                    "client-certificate", "/etc/secret-cert-path"},
        RefusedCase{"",
                    "    client-certificate-data: Y2VydA==\n    client-key: /etc/secret-key-path\n",
                    "client-key", "/etc/secret-key-path"},
        RefusedCase{"    insecure-skip-tls-verify: true\n", "", "insecure-skip-tls-verify",
                    "t0k3n"}),
    [](const auto& info) {
      std::string n = info.param.field;
      std::erase(n, '-');
      return n;
    });

TEST(KubeconfigData, PlainHttpServerIsRefusedUnlessAllowed) {
  std::string yaml = kubeconfig("    server: http://10.0.0.1:8080\n", "    token: t0k3n\n");
  try {
    ClusterConfig::from_kubeconfig_data(yaml);
    FAIL() << "accepted http://";
  } catch (const KubeconfigRefused& e) {
    EXPECT_EQ(e.field(), "server");
    EXPECT_EQ(std::string(e.what()).find("t0k3n"), std::string::npos);
  }
  KubeconfigDataOptions o;
  o.policy.allow_insecure = true;
  EXPECT_EQ(ClusterConfig::from_kubeconfig_data(yaml, o).server, "http://10.0.0.1:8080");
}

// The policy reads insecure-skip-tls-verify as the parser does: every spelling the parser takes
// for true is refused by default (a remote Secret must not switch TLS verification off with
// "on" or "Y"), and every spelling it takes for false is accepted.
TEST(KubeconfigData, EverySpellingOfTrueForInsecureSkipTlsVerifyIsRefused) {
  auto cases = [](std::initializer_list<const char*> words) {
    std::vector<std::string> out;
    for (std::string w : words) {
      std::string upper = w;
      std::string capital = w;
      for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      capital[0] = upper[0];
      out.insert(out.end(), {w, upper, capital, "\"" + w + "\"", "'" + capital + "'"});
    }
    return out;
  };
  KubeconfigDataOptions open;
  open.policy.allow_insecure = true;
  for (const std::string& spelling : cases({"true", "yes", "on", "y"})) {
    std::string yaml =
        kubeconfig(kServer + "    insecure-skip-tls-verify: " + spelling + "\n", "    token: t\n");
    try {
      ClusterConfig::from_kubeconfig_data(yaml);
      ADD_FAILURE() << "accepted insecure-skip-tls-verify: " << spelling;
    } catch (const KubeconfigRefused& e) {
      EXPECT_EQ(e.field(), "insecure-skip-tls-verify") << spelling;
    }
    // Allowed, the parser reads the same spelling as true.
    EXPECT_TRUE(ClusterConfig::from_kubeconfig_data(yaml, open).insecure_skip_tls_verify)
        << spelling;
  }
  for (const std::string& spelling : cases({"false", "no", "off", "n"})) {
    std::string yaml =
        kubeconfig(kServer + "    insecure-skip-tls-verify: " + spelling + "\n", "    token: t\n");
    EXPECT_FALSE(ClusterConfig::from_kubeconfig_data(yaml).insecure_skip_tls_verify) << spelling;
  }
}

TEST(KubeconfigData, PolicyOpensWhatAnOperatorAllows) {
  TempDir dir;
  auto token_path = dir.write("token", "file-token");
  std::string yaml = kubeconfig(kServer, "    tokenFile: " + token_path + "\n");
  EXPECT_THROW(ClusterConfig::from_kubeconfig_data(yaml), KubeconfigRefused);
  KubeconfigDataOptions o;
  o.policy.allow_token_file = true;
  ClusterConfig c = ClusterConfig::from_kubeconfig_data(yaml, o);
  ASSERT_TRUE(c.credentials);
  EXPECT_EQ(c.credentials->current()->token, "file-token");
  // allow_all is what a kubeconfig file of one's own may use.
  EXPECT_NO_THROW(
      ClusterConfig::from_kubeconfig_data(yaml, {.policy = KubeconfigPolicy::allow_all()}));
}

TEST(KubeconfigData, MalformedDataNamesTheOriginAndNeverTheToken) {
  for (const std::string& yaml : {std::string("clusters: [unclosed\n  token: t0k3n"),
                                  std::string("- a list\n"), std::string("")}) {
    try {
      ClusterConfig::from_kubeconfig_data(yaml, {.origin = "secret ns/remotes, key 'east'"});
      FAIL() << "accepted: " << yaml;
    } catch (const KubeconfigRefused&) {
      FAIL() << "a malformed kubeconfig is not a refusal";
    } catch (const ConfigError& e) {
      std::string m = e.what();
      EXPECT_NE(m.find("secret ns/remotes, key 'east'"), std::string::npos) << m;
      EXPECT_EQ(m.find("t0k3n"), std::string::npos) << m;
    }
  }
}

TEST(InCluster, ReadsServiceAccountAndRotatesToken) {
  TempDir dir;
  auto pki = testing::make_pki();
  dir.write("sa/token", "sa-token-1");
  dir.write("sa/ca.crt", pki.ca.cert_pem);
  dir.write("sa/namespace", "kube-system\n");
  InClusterOptions o;
  o.service_account_dir = dir.path + "/sa";
  o.host = "10.0.0.1";
  o.port = "443";
  ClusterConfig c = ClusterConfig::in_cluster(o);
  EXPECT_EQ(c.server, "https://10.0.0.1:443");
  EXPECT_EQ(c.namespace_, "kube-system");
  EXPECT_EQ(c.credentials->current()->token, "sa-token-1");
  dir.write("sa/token.tmp", "sa-token-2-rotated");
  fs::rename(dir.path + "/sa/token.tmp", dir.path + "/sa/token");
  EXPECT_EQ(c.credentials->current()->token, "sa-token-2-rotated");
  o.host = "";
  EXPECT_THROW(ClusterConfig::in_cluster(o), ConfigError);
  o.host = "fd00::1";
  EXPECT_EQ(ClusterConfig::in_cluster(o).server, "https://[fd00::1]:443");
}

// --- broken kubeconfigs: the message names file, entry and field, never a secret ------------

struct Broken {
  std::string name;
  std::string cluster;
  std::string user;
  std::string expect;  // substring after "kubeconfig <path>: "
};

TEST(KubeconfigErrors, EachKindNamesFileEntryFieldAndNoSecret) {
  const std::string secret = "TOPSECRET";
  std::vector<Broken> cases = {
      {"server missing", "    insecure-skip-tls-verify: true\n", "    token: " + secret + "\n",
       "cluster 'c': server is missing"},
      {"bad key base64", kServer,
       "    client-certificate-data: QUJD\n    client-key-data: " + secret + "!!\n",
       "user 'u': client-key-data is not valid base64"},
      {"bad ca base64", kServer + "    certificate-authority-data: '%%%'\n",
       "    token: " + secret + "\n",
       "cluster 'c': certificate-authority-data is not valid base64"},
      {"unreadable ca", kServer + "    certificate-authority: nope/ca.crt\n",
       "    token: " + secret + "\n", "cluster 'c': certificate-authority file "},
      {"cert without key", kServer, "    client-certificate-data: QUJD\n",
       "user 'u': client-certificate is set but client-key is missing"},
      {"token file missing", kServer, "    tokenFile: /nonexistent/token\n",
       "user 'u': tokenFile /nonexistent/token cannot be read"},
      {"bad exec version", kServer, "    exec:\n      apiVersion: v0\n      command: x\n",
       "user 'u': exec.apiVersion"},
      {"bool", kServer + "    insecure-skip-tls-verify: maybe\n", "    token: " + secret + "\n",
       "cluster 'c': insecure-skip-tls-verify must be true or false"},
  };
  for (const auto& c : cases) {
    TempDir dir;
    auto path = dir.write("config", kubeconfig(c.cluster, c.user));
    std::string m = message_of(at(path));
    EXPECT_NE(m.find("kubeconfig " + path + ": " + c.expect), std::string::npos)
        << c.name << ": " << m;
    EXPECT_EQ(m.find(secret), std::string::npos) << c.name << ": " << m;
  }
}

TEST(KubeconfigErrors, StructuralProblems) {
  TempDir dir;
  auto bad_yaml = dir.write("bad", "clusters: [\n  token: TOPSECRET\n");
  std::string m = message_of(at(bad_yaml));
  EXPECT_NE(m.find("kubeconfig " + bad_yaml + ": invalid YAML"), std::string::npos) << m;
  EXPECT_EQ(m.find("TOPSECRET"), std::string::npos);

  auto no_ctx = dir.write("noctx", kubeconfig(kServer, "    token: t\n", "other"));
  m = message_of(at(no_ctx));
  EXPECT_NE(m.find("kubeconfig " + no_ctx + ": context 'other' not found"), std::string::npos) << m;

  auto no_cluster = dir.write(
      "nocluster", "current-context: x\ncontexts:\n- name: x\n  context:\n    cluster: gone\n");
  m = message_of(at(no_cluster));
  EXPECT_NE(m.find("context 'x': cluster 'gone' not found"), std::string::npos) << m;

  m = message_of(at(dir.path + "/does-not-exist"));
  EXPECT_NE(m.find("does-not-exist: cannot be read"), std::string::npos) << m;

  auto no_current = dir.write("nocurrent", "clusters: []\n");
  m = message_of(at(no_current));
  EXPECT_NE(m.find("current-context is not set"), std::string::npos) << m;
}

// --- unreadable files, tested so that it asserts something when run as root (CI) ----------

TEST(KubeconfigErrors, PathThatIsADirectory) {
  TempDir dir;
  fs::create_directories(dir.path + "/config.d");
  std::string m = message_of(at(dir.path + "/config.d"));
  EXPECT_NE(m.find("kubeconfig " + dir.path + "/config.d: cannot be read: it is a directory"),
            std::string::npos)
      << m;
}

TEST(KubeconfigErrors, PathThroughAFile) {
  TempDir dir;
  auto file = dir.write("file", "x: 1\n");
  std::string m = message_of(at(file + "/config"));
  EXPECT_NE(m.find("kubeconfig " + file + "/config: cannot be read: Not a directory"),
            std::string::npos)
      << m;
}

// File permissions do not stop root, so as root the check runs in a forked child that gave up
// root first (setresuid to nobody); as any other user it runs directly.
TEST(KubeconfigErrors, UnreadableFile) {
  TempDir dir;
  fs::permissions(dir.path, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  auto unreadable = dir.write("unreadable", "x: 1\n", fs::perms::none);
  const std::string expect = "kubeconfig " + unreadable + ": cannot be read: Permission denied";
  if (::geteuid() != 0) {
    std::string m = message_of(at(unreadable));
    EXPECT_NE(m.find(expect), std::string::npos) << m;
    return;
  }
  pid_t pid = ::fork();
  ASSERT_NE(pid, -1);
  if (pid == 0) {
    constexpr uid_t kNobody = 65534;
    if (::setgroups(0, nullptr) != 0 || ::setresgid(kNobody, kNobody, kNobody) != 0 ||
        ::setresuid(kNobody, kNobody, kNobody) != 0) {
      ::_exit(2);
    }
    std::string m = message_of(at(unreadable));
    if (m.find(expect) == std::string::npos) {
      std::fprintf(stderr, "child got: %s\n", m.c_str());
      ::_exit(1);
    }
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_NE(WEXITSTATUS(status), 2) << "could not drop root in the child";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "expected: " << expect;
}

TEST(KubeconfigErrors, EmptyFile) {
  TempDir dir;
  for (const char* content : {"", "# nothing here\n", "---\n"}) {
    auto path = dir.write("config", content);
    std::string m = message_of(at(path));
    EXPECT_NE(m.find("kubeconfig " + path + ": the file is empty (no clusters, users or contexts)"),
              std::string::npos)
        << "content '" << content << "': " << m;
  }
  // In a KUBECONFIG list an empty file is skipped like a missing one (kubectl).
  auto empty = dir.write("empty", "");
  auto full = dir.write("full", kubeconfig(kServer, "    token: t\n"));
  KubeconfigOptions o;
  o.kubeconfig_env = empty + ":" + full;
  EXPECT_EQ(ClusterConfig::from_kubeconfig(o).server, "https://127.0.0.1:6443");
  o.kubeconfig_env = empty + ":" + empty;
  std::string m = message_of(o);
  EXPECT_NE(m.find(": every file is empty"), std::string::npos) << m;
}

// --- kubectl's precedence and path rules ----------------------------------------------------

TEST(Kubeconfig, TokenBeatsTokenFile) {
  TempDir dir;
  dir.write("token", "from-file\n");
  auto path =
      dir.write("config", kubeconfig(kServer, "    token: from-token\n    tokenFile: token\n"));
  ClusterConfig c = ClusterConfig::from_kubeconfig(at(path));
  ASSERT_TRUE(c.credentials);
  auto creds = c.credentials->current();
  ASSERT_TRUE(creds) << creds.error().to_string();
  EXPECT_EQ(creds->token, "from-token");
}

TEST(KubeconfigErrors, InsecureSkipTlsVerifyWithCaIsRejected) {
  TempDir dir;
  auto pki = testing::make_pki();
  dir.write("ca.crt", pki.ca.cert_pem);
  for (const std::string& ca : {"    certificate-authority-data: " + base64(pki.ca.cert_pem) + "\n",
                                std::string("    certificate-authority: ca.crt\n")}) {
    auto path = dir.write(
        "config",
        kubeconfig(kServer + "    insecure-skip-tls-verify: true\n" + ca, "    token: t\n"));
    std::string m = message_of(at(path));
    EXPECT_NE(
        m.find("kubeconfig " + path +
               ": cluster 'c': insecure-skip-tls-verify and certificate-authority are mutually "
               "exclusive"),
        std::string::npos)
        << m;
  }
}

TEST(KubeconfigErrors, AuthProviderIsRejected) {
  TempDir dir;
  auto path = dir.write("config", kubeconfig(kServer,
                                             "    auth-provider:\n      name: gcp\n      config:\n"
                                             "        access-token: TOPSECRET\n"));
  std::string m = message_of(at(path));
  EXPECT_NE(m.find("kubeconfig " + path +
                   ": user 'u': auth-provider is not supported; use an exec "
                   "credential plugin"),
            std::string::npos)
      << m;
  EXPECT_EQ(m.find("TOPSECRET"), std::string::npos) << m;
}

TEST(Kubeconfig, TildeExpandsToHome) {
  TempDir home;
  TempDir dir;
  auto pki = testing::make_pki();
  home.write("secrets/token", "home-token\n");
  home.write("pki/ca.crt", pki.ca.cert_pem);
  testing::ScopedEnv env("HOME", home.path);
  auto path = dir.write("config", kubeconfig(kServer + "    certificate-authority: ~/pki/ca.crt\n",
                                             "    tokenFile: ~/secrets/token\n"));
  ClusterConfig c = ClusterConfig::from_kubeconfig(at(path));
  EXPECT_EQ(c.ca_pem, pki.ca.cert_pem);
  auto creds = c.credentials->current();
  ASSERT_TRUE(creds) << creds.error().to_string();
  EXPECT_EQ(creds->token, "home-token");
}

TEST(Kubeconfig, DefaultsToHomeKubeConfigWhenKubeconfigIsUnset) {
  TempDir home;
  home.write(".kube/config",
             kubeconfig("    server: https://home.example:6443\n", "    token: t\n"));
  testing::ScopedEnv h("HOME", home.path);
  testing::ScopedEnv k("KUBECONFIG", std::nullopt);
  EXPECT_EQ(ClusterConfig::from_kubeconfig().server, "https://home.example:6443");
  KubeconfigOptions empty_env;  // KUBECONFIG set but empty: the same default
  empty_env.kubeconfig_env = "";
  EXPECT_EQ(ClusterConfig::from_kubeconfig(empty_env).server, "https://home.example:6443");
  fs::remove(home.path + "/.kube/config");
  std::string m = message_of({});
  EXPECT_NE(m.find("kubeconfig " + home.path + "/.kube/config: cannot be read"), std::string::npos)
      << m;
}
// --- load_default: explicit path, KUBECONFIG, in-cluster, ~/.kube/config, first match wins --

// Every source load_default may pick, each with its own server, so a test sees which one won.
struct Sources {
  TempDir home;
  TempDir dir;
  testing::Pki pki = testing::make_pki();
  std::string explicit_file =
      dir.write("explicit", kubeconfig("    server: https://explicit.example:6443\n", ""));
  std::string env_file = dir.write("env", kubeconfig("    server: https://env.example:6443\n", ""));
  InClusterOptions pod;
  testing::ScopedEnv home_env{"HOME", home.path};

  Sources() {
    home.write(".kube/config", kubeconfig("    server: https://home.example:6443\n", ""));
    dir.write("sa/token", "TOPSECRET-sa-token");
    dir.write("sa/ca.crt", pki.ca.cert_pem);
    pod.service_account_dir = dir.path + "/sa";
    pod.host = "10.96.0.1";
    pod.port = "443";
  }
  KubeconfigOptions with_env() const {
    KubeconfigOptions o;
    o.kubeconfig_env = env_file;
    return o;
  }
  static KubeconfigOptions no_env() {
    KubeconfigOptions o;
    o.kubeconfig_env = "";
    return o;
  }
};

std::string load_default_message(const KubeconfigOptions& o, const InClusterOptions& pod) {
  try {
    ClusterConfig::load_default(o, pod);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

TEST(LoadDefault, ExplicitPathBeatsEverything) {
  Sources s;
  KubeconfigOptions o = s.with_env();
  o.path = s.explicit_file;
  EXPECT_EQ(ClusterConfig::load_default(o, s.pod).server, "https://explicit.example:6443");
  o.kubeconfig_env = "";  // nor does a Pod's configuration win over it
  EXPECT_EQ(ClusterConfig::load_default(o, s.pod).server, "https://explicit.example:6443");
}

TEST(LoadDefault, KubeconfigBeatsInClusterAndHome) {
  Sources s;
  EXPECT_EQ(ClusterConfig::load_default(s.with_env(), s.pod).server, "https://env.example:6443");
  // Read from the environment when the options do not override it.
  testing::ScopedEnv k("KUBECONFIG", s.env_file);
  EXPECT_EQ(ClusterConfig::load_default({}, s.pod).server, "https://env.example:6443");
}

TEST(LoadDefault, BrokenKubeconfigFailsInsteadOfFallingThrough) {
  Sources s;
  KubeconfigOptions o;
  o.kubeconfig_env = s.dir.path + "/missing";
  std::string m = load_default_message(o, s.pod);
  EXPECT_NE(m.find("KUBECONFIG is set: kubeconfig: none of " + s.dir.path + "/missing exists"),
            std::string::npos)
      << m;
}

TEST(LoadDefault, InClusterInAPodBeatsHome) {
  Sources s;
  ClusterConfig c = ClusterConfig::load_default(Sources::no_env(), s.pod);
  EXPECT_EQ(c.server, "https://10.96.0.1:443");
  EXPECT_EQ(c.context, "in-cluster");
  EXPECT_EQ(c.credentials->current()->token, "TOPSECRET-sa-token");
  // The service variables come from the environment when the options do not override them.
  testing::ScopedEnv h("KUBERNETES_SERVICE_HOST", "10.96.0.2");
  testing::ScopedEnv p("KUBERNETES_SERVICE_PORT", "6443");
  InClusterOptions from_env;
  from_env.service_account_dir = s.pod.service_account_dir;
  EXPECT_EQ(ClusterConfig::load_default(Sources::no_env(), from_env).server,
            "https://10.96.0.2:6443");
}

TEST(LoadDefault, NotInAPodWithoutServiceVariablesOrTokenFile) {
  Sources s;
  InClusterOptions no_host = s.pod;
  no_host.host = "";
  EXPECT_EQ(ClusterConfig::load_default(Sources::no_env(), no_host).server,
            "https://home.example:6443");
  InClusterOptions no_port = s.pod;
  no_port.port = "";
  EXPECT_EQ(ClusterConfig::load_default(Sources::no_env(), no_port).server,
            "https://home.example:6443");
  fs::remove(s.dir.path + "/sa/token");
  EXPECT_EQ(ClusterConfig::load_default(Sources::no_env(), s.pod).server,
            "https://home.example:6443");
}

TEST(LoadDefault, BrokenPodFailsInsteadOfFallingThrough) {
  Sources s;
  fs::remove(s.dir.path + "/sa/ca.crt");
  std::string m = load_default_message(Sources::no_env(), s.pod);
  EXPECT_NE(m.find("in-cluster config: " + s.dir.path + "/sa/ca.crt cannot be read"),
            std::string::npos)
      << m;
}

TEST(LoadDefault, NothingFoundSaysWhatWasTriedAndWhy) {
  Sources s;
  fs::remove(s.home.path + "/.kube/config");
  InClusterOptions no_host = s.pod;  // the token file exists, but this is not a Pod
  no_host.host = "";
  std::string m = load_default_message(Sources::no_env(), no_host);
  EXPECT_EQ(
      m,
      "no cluster configuration found: (1) no explicit kubeconfig path was given; (2) KUBECONFIG "
      "is not set; "
      "(3) in-cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not both set; (4) " +
          s.home.path + "/.kube/config does not exist.");
  EXPECT_EQ(m.find("TOPSECRET"), std::string::npos) << m;
  fs::remove(s.dir.path + "/sa/token");
  m = load_default_message(Sources::no_env(), s.pod);
  EXPECT_NE(
      m.find("(3) in-cluster: KUBERNETES_SERVICE_HOST/PORT are set but " + s.dir.path +
             "/sa/token does not exist; (4) " + s.home.path + "/.kube/config does not exist."),
      std::string::npos)
      << m;
  EXPECT_EQ(m.find("TOPSECRET"), std::string::npos) << m;
  testing::ScopedEnv no_home("HOME", std::nullopt);
  m = load_default_message(Sources::no_env(), no_host);
  EXPECT_NE(m.find("(4) ~/.kube/config: HOME is not set."), std::string::npos) << m;
}
}  // namespace
}  // namespace kinformer::client
