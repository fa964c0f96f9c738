// TLS behaviour of the transport, exercised through RestClient::get_raw against FakeApiServer.
#include <arpa/inet.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <gtest/gtest.h>

#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <future>
#include <mutex>
#include <set>
#include <utility>

#include "fake_apiserver.h"
#include "kinformer/client/dynamic_object.h"
#include "kinformer/client/rest_client.h"
#include "test_resources.h"

// A name server that never answers, for one name. The test binary's getaddrinfo() takes the C
// library's place (the executable's definition wins for the client library linked into it):
// kHangingHost blocks until the test releases it, as behind an unreachable name server; every
// other name goes to the real resolver.
namespace hanging_dns {
constexpr const char* kHost = "hanging-dns.kinformer.test";
std::mutex mu;
std::condition_variable cv;
bool released = false;

void release() {
  std::lock_guard lock(mu);
  released = true;
  cv.notify_all();
}
}  // namespace hanging_dns

extern "C" int getaddrinfo(const char* node, const char* service, const addrinfo* hints,
                           addrinfo** res) {
  if (node != nullptr && std::strcmp(node, hanging_dns::kHost) == 0) {
    std::unique_lock lock(hanging_dns::mu);
    hanging_dns::cv.wait_for(lock, std::chrono::seconds(60), [] { return hanging_dns::released; });
    return EAI_AGAIN;
  }
  using Fn = int (*)(const char*, const char*, const addrinfo*, addrinfo**);
  static const auto real = reinterpret_cast<Fn>(::dlsym(RTLD_NEXT, "getaddrinfo"));
  return real(node, service, hints, res);
}

namespace kinformer::client {
namespace {

using kinformer::testing::FakeApiServer;
using kinformer::testing::FakeApiServerOptions;
using kinformer::testing::Reply;
using kinformer::testing::Request;

std::unique_ptr<FakeApiServer> tls_server(testing::PkiOptions pki = {},
                                          bool require_client_cert = false) {
  FakeApiServerOptions o;
  o.tls = true;
  o.require_client_cert = require_client_cert;
  o.pki = testing::make_pki(pki);
  auto server = std::make_unique<FakeApiServer>(std::move(o));
  server->on("GET", "/readyz", [](const Request&) { return Reply::text("ok"); });
  return server;
}

RestClientOptions fast() {
  RestClientOptions o;
  o.request_timeout = std::chrono::milliseconds(5000);
  o.rate_limit.qps = 0;
  return o;
}

TEST(Transport, TrustedCaSucceeds) {
  auto server = tls_server();
  RestClient client(server->cluster_config(), fast());
  auto r = client.get_raw("/readyz");
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "ok");
  // Keep-alive: a second request reuses the connection (the check that a kept connection has
  // nothing to read finds nothing on a live TLS one, session tickets included).
  ASSERT_TRUE(client.get_raw("/readyz"));
  EXPECT_EQ(server->open_connections(), 1u);
  const auto requests = server->requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[1].connection, requests[0].connection);
}

TEST(Transport, UnknownCaFailsWithReasonAndNeverFallsBack) {
  auto server = tls_server();
  ClusterConfig config = server->cluster_config();
  config.ca_pem = testing::make_ca("some-other-ca").cert_pem;
  RestClient client(config, fast());
  auto r = client.get_raw("/readyz");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::tls);
  EXPECT_NE(
      r.error().message.find("certificate verify failed: unable to get local issuer certificate"),
      std::string::npos)
      << r.error().message;
  EXPECT_EQ(server->request_count(), 0u);
}

TEST(Transport, HostnameMismatch) {
  auto server = tls_server({.server_dns_names = {"localhost"}, .server_ip_addresses = {}});
  RestClient by_ip(server->cluster_config(), fast());  // connects to 127.0.0.1, not in the cert
  auto r = by_ip.get_raw("/readyz");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::tls);
  EXPECT_NE(r.error().message.find("IP address mismatch"), std::string::npos) << r.error().message;

  ClusterConfig config = server->cluster_config();
  config.tls_server_name = "wrong.example";
  RestClient wrong(config, fast());
  auto w = wrong.get_raw("/readyz");
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error().code, Errc::tls);
  EXPECT_NE(w.error().message.find("hostname mismatch"), std::string::npos) << w.error().message;
}

TEST(Transport, TlsServerNameOverride) {
  auto server = tls_server({.server_dns_names = {"apiserver.internal"}, .server_ip_addresses = {}});
  ClusterConfig config = server->cluster_config();
  config.tls_server_name = "apiserver.internal";
  RestClient client(config, fast());
  auto r = client.get_raw("/readyz");
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(r->status, 200);
}

TEST(Transport, ExpiredServerCertificate) {
  auto server = tls_server({.server_expired = true});
  RestClient client(server->cluster_config(), fast());
  auto r = client.get_raw("/readyz");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::tls);
  EXPECT_NE(r.error().message.find("certificate has expired"), std::string::npos)
      << r.error().message;
}

TEST(Transport, InsecureSkipVerifyIsExplicit) {
  auto server = tls_server();
  ClusterConfig config = server->cluster_config();
  config.ca_pem.clear();
  config.insecure_skip_tls_verify = true;
  RestClient client(config, fast());
  EXPECT_TRUE(client.get_raw("/readyz"));
}

TEST(Transport, ClientCertificateRequired) {
  auto server = tls_server({}, /*require_client_cert=*/true);
  Credentials creds;
  creds.client_cert_pem = server->pki().client.cert_pem;
  creds.client_key_pem = server->pki().client.key_pem;
  RestClient with(server->cluster_config(static_credentials(creds)), fast());
  auto ok = with.get_raw("/readyz");
  ASSERT_TRUE(ok) << ok.error().to_string();
  EXPECT_EQ(ok->status, 200);

  RestClient without(server->cluster_config(), fast());
  auto r = without.get_raw("/readyz");
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().code == Errc::tls || r.error().code == Errc::network)
      << r.error().to_string();
}

TEST(Transport, BadClientKeyIsAnAuthErrorWithoutSecrets) {
  auto server = tls_server();
  Credentials creds;
  creds.client_cert_pem = server->pki().client.cert_pem;
  creds.client_key_pem =
      "-----BEGIN PRIVATE KEY-----\nc2VjcmV0LWtleQ==\n-----END PRIVATE KEY-----\n";
  RestClient client(server->cluster_config(static_credentials(creds)), fast());
  auto r = client.get_raw("/readyz");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::auth);
  EXPECT_EQ(r.error().message.find("c2VjcmV0"), std::string::npos);
}

// OpenSSL's default would ask for the passphrase on the terminal (holding the client's TLS
// mutex, so every request waits): the key is refused at once, saying why.
TEST(Transport, EncryptedClientKeyIsRefusedWithoutAPrompt) {
  auto server = tls_server({}, /*require_client_cert=*/true);
  for (const bool pkcs8 : {true, false}) {
    Credentials creds;
    creds.client_cert_pem = server->pki().client.cert_pem;
    creds.client_key_pem =
        testing::encrypted_key_pem(server->pki().client.key_pem, "s3cr3t", pkcs8);
    RestClient client(server->cluster_config(static_credentials(creds)), fast());
    auto r = client.get_raw("/readyz");
    ASSERT_FALSE(r) << "pkcs8 " << pkcs8;
    EXPECT_EQ(r.error().code, Errc::auth) << r.error().to_string();
    EXPECT_NE(r.error().message.find(
                  "client key is encrypted; kinformer does not prompt for a passphrase"),
              std::string::npos)
        << r.error().message;
  }
  EXPECT_EQ(server->request_count(), 0u);
}

// The TLS context is kept while the client certificate and key stay the same (the connection
// is reused), and replaced when they change (a new connection, with the new certificate).
TEST(Transport, ChangedClientCertificateGetsANewContextAndConnection) {
  auto server = tls_server({}, /*require_client_cert=*/true);
  struct Switching final : CredentialsProvider {
    Result<Credentials> current() override {
      std::lock_guard lock(mu);
      return now;
    }
    std::mutex mu;
    Credentials now;
  };
  auto creds = std::make_shared<Switching>();
  creds->now.client_cert_pem = server->pki().client.cert_pem;
  creds->now.client_key_pem = server->pki().client.key_pem;
  RestClient client(server->cluster_config(creds), fast());
  ASSERT_TRUE(client.get_raw("/readyz"));
  ASSERT_TRUE(client.get_raw("/readyz"));
  testing::CertKey other =
      testing::make_cert(server->pki().ca, {.common_name = "other-client", .server = false});
  {
    std::lock_guard lock(creds->mu);
    creds->now.client_cert_pem = other.cert_pem;
    creds->now.client_key_pem = other.key_pem;
  }
  auto r = client.get_raw("/readyz");
  ASSERT_TRUE(r) << r.error().to_string();
  const auto requests = server->requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[1].connection, requests[0].connection);
  EXPECT_NE(requests[2].connection, requests[0].connection);
}

TEST(Transport, BadServerUrlAndCaThrowConfigError) {
  ClusterConfig config;
  config.server = "ftp://x";
  EXPECT_THROW(RestClient(config, fast()), ConfigError);
  config.server = "https://127.0.0.1:1";
  config.ca_pem = "not a pem";
  EXPECT_THROW(RestClient(config, fast()), ConfigError);
}

// https://admin:pw@10.0.0.1 would parse as host "admin", port "pw@10.0.0.1", and the password
// would reach "connect to ..." errors and every log line's server field. It is refused, and the
// message does not repeat the URL.
TEST(Transport, ServerUrlWithCredentialsIsRefusedWithoutEchoingThem) {
  for (const std::string server :
       {"https://admin:s3cr3t@10.0.0.1", "https://admin:s3cr3t@10.0.0.1:6443/prefix",
        "http://s3cr3t@127.0.0.1:8080", "https://admin:s3cr3t@[::1]:6443", "https://:s3cr3t@host",
        "ftp://admin:s3cr3t@host", "admin:s3cr3t@host",
        // A '/' in the password hides the '@' from a check that ends the authority at '/'.
        "https://admin:s3/cr3t@10.0.0.1",
        // So an '@' in the path is refused too (no API server path needs one).
        "https://127.0.0.1:6443/clusters/a@b"}) {
    ClusterConfig config;
    config.server = server;
    try {
      RestClient client(config, fast());
      ADD_FAILURE() << server << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_STREQ(e.what(), "server URL must not carry credentials (user:password@)") << server;
    }
  }
  // An '@' after the query starts is no userinfo.
  ClusterConfig config;
  config.server = "https://127.0.0.1:6443/?a=b@c";
  EXPECT_NO_THROW(RestClient(config, fast()));
}

// OpenSSL refuses some names as verification targets (a scoped IPv6 literal); the connection
// must fail then rather than check only the certificate chain.
TEST(Transport, ServerNameOpenSslCannotCheckFailsTheConnection) {
  auto server = tls_server();
  ClusterConfig config = server->cluster_config();
  config.tls_server_name = "fe80::1%eth0";
  RestClient client(config, fast());
  auto r = client.get_raw("/readyz");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::tls) << r.error().to_string();
  EXPECT_NE(r.error().message.find("fe80::1%eth0"), std::string::npos) << r.error().message;
  EXPECT_EQ(server->request_count(), 0u);
}

// Name resolution is part of the request and bounded by its deadline.
TEST(Transport, DnsResolutionIsBoundedByTheRequestDeadline) {
  {
    std::lock_guard lock(hanging_dns::mu);
    hanging_dns::released = false;
  }
  ClusterConfig config;
  config.server = std::string("http://") + hanging_dns::kHost + ":8080";
  RestClientOptions options = fast();
  options.request_timeout = std::chrono::milliseconds(300);
  RestClient client(config, options);
  auto result = std::async(std::launch::async, [&] { return client.get_raw("/readyz"); });
  // Only proves that it did not wait for the name server.
  bool ready = result.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
  hanging_dns::release();  // the resolver's thread is joined when the client goes away
  ASSERT_TRUE(ready);
  auto r = result.get();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::timeout) << r.error().to_string();
  EXPECT_NE(r.error().message.find(std::string("resolve ") + hanging_dns::kHost), std::string::npos)
      << r.error().message;
}

TEST(Transport, ConnectionRefusedIsNetworkError) {
  std::string url;
  {
    FakeApiServer server;
    url = server.url();
  }
  ClusterConfig config;
  config.server = url;
  RestClient client(config, fast());
  auto r = client.get_raw("/readyz");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::network);
}

// The descriptors of this process's TCP sockets connected to 127.0.0.1:`port`.
std::vector<int> sockets_connected_to(std::uint16_t port) {
  std::vector<int> out;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    const int fd = std::stoi(entry.path().filename().string());
    sockaddr_in peer{};
    socklen_t len = sizeof peer;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0 ||
        peer.sin_family != AF_INET)
      continue;
    if (ntohs(peer.sin_port) == port) out.push_back(fd);
  }
  return out;
}

// A child process (an exec credential plugin, or anything the embedding program runs) must not
// inherit the client's connections: while it holds a copy, closing a watch closes nothing on
// the wire, and the API server keeps serving the watch (the chaos suite saw watches that never
// heard of a closed connection because a daemon started by the test had inherited them).
TEST(Transport, ConnectionsAreCloseOnExec) {
  auto server = tls_server();
  RestClient client(server->cluster_config(), fast());
  ASSERT_TRUE(client.get_raw("/readyz"));  // the connection stays open in the pool
  const auto fds = sockets_connected_to(server->port());
  ASSERT_FALSE(fds.empty());
  for (int fd : fds) {
    const int flags = ::fcntl(fd, F_GETFD);
    ASSERT_GE(flags, 0);
    EXPECT_TRUE(flags & FD_CLOEXEC) << "fd " << fd << " would be inherited by a child process";
  }
}

// A path that silently drops packets (a dead NAT entry) must be found by the kernel within a
// bound, idle or not: every client connection has TCP keepalive (30 s idle, 10 s interval, 3
// probes) and TCP_USER_TIMEOUT (60 s). Mutant client-sockets-no-keepalive.
TEST(Transport, ConnectionsHaveKeepaliveAndAUserTimeout) {
  auto server = tls_server();
  RestClient client(server->cluster_config(), fast());
  ASSERT_TRUE(client.get_raw("/readyz"));  // the connection stays open in the pool
  const auto fds = sockets_connected_to(server->port());
  ASSERT_FALSE(fds.empty());
  auto option = [](int fd, int level, int name) {
    int value = -1;
    socklen_t len = sizeof value;
    EXPECT_EQ(::getsockopt(fd, level, name, &value, &len), 0);
    return value;
  };
  for (int fd : fds) {
    EXPECT_EQ(option(fd, SOL_SOCKET, SO_KEEPALIVE), 1) << "fd " << fd;
    EXPECT_EQ(option(fd, IPPROTO_TCP, TCP_KEEPIDLE), 30);
    EXPECT_EQ(option(fd, IPPROTO_TCP, TCP_KEEPINTVL), 10);
    EXPECT_EQ(option(fd, IPPROTO_TCP, TCP_KEEPCNT), 3);
    EXPECT_EQ(option(fd, IPPROTO_TCP, TCP_USER_TIMEOUT), 60'000);
  }
}

// --- the TLS data path: records, deadlines, the ends of a connection --------------------------

// A Pod named p<i> at resourceVersion <i>, its spec padded with `pad` bytes.
std::string padded_pod(int i, std::size_t pad) {
  return R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p)" + std::to_string(i) +
         R"(","namespace":"ns","resourceVersion":")" + std::to_string(i) + R"("},"spec":{"pad":")" +
         std::string(pad, 'x') + R"("}})";
}

// A body of many TLS records arrives whole, and the connection is reused after it.
TEST(TransportTlsData, ALargeBodyArrivesWholeAndTheConnectionIsReused) {
  auto server = tls_server();
  std::string list =
      R"({"apiVersion":"v1","kind":"PodList","metadata":{"resourceVersion":"9"},"items":[)";
  constexpr int kPodsInList = 3000;
  for (int i = 0; i < kPodsInList; ++i) {
    if (i != 0) list += ',';
    list += padded_pod(i, static_cast<std::size_t>(i % 1500));
  }
  list += "]}";
  ASSERT_GT(list.size(), std::size_t{2} << 20);  // more than a hundred 16 KiB records
  server->on("GET", "/api/v1/pods", [&list](const Request&) { return Reply::json(list); });
  RestClient client(server->cluster_config(), fast());
  for (int round = 0; round < 2; ++round) {
    auto r = client.list(kPods, "", {});
    ASSERT_TRUE(r) << r.error().to_string();
    ASSERT_EQ(r->items.size(), std::size_t{kPodsInList});
    EXPECT_EQ(r->items.back()->metadata.name, "p" + std::to_string(kPodsInList - 1));
    EXPECT_EQ(r->resource_version, "9");
  }
  const auto requests = server->requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[1].connection, requests[0].connection);
}

// A TLS server whose Pod watch is `stream`, and a client of it.
struct TlsWatch {
  std::unique_ptr<FakeApiServer> server = tls_server();
  std::shared_ptr<testing::ScriptedStream> stream = [this] {
    auto s = std::make_shared<testing::ScriptedStream>();
    server->on("GET", "/api/v1/pods", [s](const Request&) { return Reply::streaming(s); });
    return s;
  }();
  RestClient client{server->cluster_config(), fast()};
};

// Every event of a watch over TLS arrives in order, small ones and ones that span several
// records; a stream cut without its last chunk is reported as cut, after what came before it.
TEST(TransportTlsData, AWatchDeliversEveryEventThenReportsTheCut) {
  TlsWatch t;
  auto& stream = t.stream;
  auto w = t.client.watch(kPods, "", {});
  ASSERT_TRUE(w) << w.error().to_string();
  constexpr int kEvents = 300;
  std::string batch;
  for (int i = 0; i < kEvents; ++i) {
    const std::size_t pad = i % 10 == 0 ? 40'000 : static_cast<std::size_t>(i);
    batch += testing::watch_event_line("ADDED", padded_pod(i, pad));
    if (i % 7 == 6) stream->send(std::exchange(batch, {}));
  }
  stream->send(batch);
  ASSERT_TRUE(stream->wait_drained(std::chrono::seconds(30)));
  stream->abort();
  for (int i = 0; i < kEvents; ++i) {
    auto e = (*w)->next();
    ASSERT_TRUE(e) << "event " << i << ": " << e.error().to_string();
    ASSERT_TRUE(e->has_value()) << "the stream ended early, at event " << i;
    EXPECT_EQ((*e)->object->metadata.name, "p" + std::to_string(i));
  }
  auto end = (*w)->next();
  ASSERT_FALSE(end);
  EXPECT_EQ(end.error().code, Errc::truncated) << end.error().to_string();
}

// Events at hand arrive while the server is silent: bytes decrypted in the TLS layer (an event
// larger than Beast's reads, which take a few hundred bytes at a time) and bytes read and not
// parsed yet (two chunks that came in one record). An event left behind would wait for the idle
// deadline (5 s here) and come as its timeout instead.
TEST(TransportTlsData, EventsAtHandArriveWhileTheServerIsSilent) {
  TlsWatch t;
  auto w = t.client.watch(kPods, "", {});
  ASSERT_TRUE(w) << w.error().to_string();
  (*w)->set_idle_timeout(std::chrono::seconds(5));
  auto expect_next = [&](const std::string& name) {
    auto e = (*w)->next();
    ASSERT_TRUE(e) << name << ": " << e.error().to_string();
    ASSERT_TRUE(e->has_value()) << name << ": the stream ended";
    EXPECT_EQ((*e)->object->metadata.name, name);
  };
  t.stream->send(testing::watch_event_line("ADDED", padded_pod(1, 3000)));
  expect_next("p1");
  auto chunk = [](const std::string& bytes) {
    char size[32];
    std::snprintf(size, sizeof size, "%zx\r\n", bytes.size());
    return size + bytes + "\r\n";
  };
  t.stream->send_raw(chunk(testing::watch_event_line("ADDED", padded_pod(2, 10))) +
                     chunk(testing::watch_event_line("ADDED", padded_pod(3, 10))));
  expect_next("p2");
  expect_next("p3");
  t.stream->end();
}

// A watch ended by the server's terminating chunk ends cleanly over TLS.
TEST(TransportTlsData, AWatchTheServerEndsEndsCleanly) {
  TlsWatch t;
  auto& stream = t.stream;
  auto w = t.client.watch(kPods, "", {});
  ASSERT_TRUE(w) << w.error().to_string();
  stream->send(testing::watch_event_line("ADDED", padded_pod(1, 10)));
  stream->end();
  auto e = (*w)->next();
  ASSERT_TRUE(e && e->has_value());
  auto end = (*w)->next();
  ASSERT_TRUE(end) << end.error().to_string();
  EXPECT_FALSE(end->has_value());
}

// The request deadline ends a TLS exchange whose answer does not come, as a timeout.
TEST(TransportTlsData, TheRequestDeadlineEndsAnUnansweredExchange) {
  auto server = tls_server();
  auto gate = std::make_shared<testing::ReplyGate>();
  server->on("GET", "/held", [gate](const Request&) {
    Reply r = Reply::text("late");
    r.gate = gate;
    return r;
  });
  RestClientOptions o = fast();
  o.request_timeout = std::chrono::milliseconds(300);
  RestClient client(server->cluster_config(), o);
  auto r = client.get_raw("/held");
  gate->open();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::timeout) << r.error().to_string();
  // The connection it was on is closed, not kept: the next request goes on a new one.
  auto next = client.get_raw("/readyz");
  ASSERT_TRUE(next) << next.error().to_string();
  const auto requests = server->requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_NE(requests[1].connection, requests[0].connection);
}

// A kept TLS connection the server drops when the next request arrives (it read the request,
// then closed without an answer or a close_notify): a GET is sent again on a new connection, a
// POST is not (the server may have applied it).
TEST(TransportTlsData, AKeptConnectionDroppedAtTheNextRequestIsRetriedOnlyWhenSafe) {
  auto server = tls_server();
  auto seen = std::make_shared<std::set<std::uint64_t>>();
  auto first_on_each = [seen](const Request& r) {
    return seen->insert(r.connection).second ? Reply::json(padded_pod(1, 0)) : Reply::dropped();
  };
  server->on("GET", "/api/v1/namespaces/ns/pods/p1", first_on_each);
  server->on("POST", "/api/v1/namespaces/ns/pods", first_on_each);
  RestClient client(server->cluster_config(), fast());
  ASSERT_TRUE(client.get(kPods, "ns", "p1"));
  auto again = client.get(kPods, "ns", "p1");
  ASSERT_TRUE(again) << again.error().to_string();
  EXPECT_EQ((*again)->metadata.name, "p1");
  const auto requests = server->requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[1].connection, requests[0].connection);  // the kept one, dropped
  EXPECT_NE(requests[2].connection, requests[1].connection);  // the retry, on a new one

  DynamicObject pod;
  pod.metadata.name = "p2";
  pod.metadata.namespace_ = "ns";
  pod.json = padded_pod(2, 0);
  auto created = client.create(kPods, pod);
  ASSERT_FALSE(created);
  EXPECT_EQ(created.error().code, Errc::network) << created.error().to_string();
  EXPECT_NE(created.error().message.find("not retried"), std::string::npos)
      << created.error().message;
}

}  // namespace
}  // namespace kinformer::client
