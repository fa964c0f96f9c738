#include "kinformer/client/rest_client.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <future>
#include <mutex>
#include <set>
#include <thread>

#include "fake_apiserver.h"
#include "fake_clock.h"
#include "kinformer/client/dynamic_object.h"
#include "temp_files.h"
#include "test_resources.h"

namespace kinformer::client {
namespace {

using namespace std::chrono_literals;
using kinformer::testing::FakeApiServer;
using kinformer::testing::Reply;
using kinformer::testing::Request;
using kinformer::testing::ScriptedStream;
using kinformer::testing::watch_event_line;

const ResourceType kEndpoints = dynamic_resource({"", "v1", "endpoints", "Endpoints", true});

// A Pod ADDED event named p<i> at resourceVersion <i>, its spec padded with `pad` bytes.
std::string padded_pod_event(int i, std::size_t pad) {
  return watch_event_line(
      "ADDED", R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p)" + std::to_string(i) +
                   R"(","namespace":"ns","resourceVersion":")" + std::to_string(i) +
                   R"("},"spec":{"pad":")" + std::string(pad, 'x') + R"("}})");
}

Credentials token(std::string t) {
  Credentials c;
  c.token = std::move(t);
  return c;
}

ListOptions limit(std::int64_t n) {
  ListOptions o;
  o.limit = n;
  return o;
}

TEST(ListQuery, EncodesEveryOption) {
  ListOptions o;
  o.label_selector = "app in (a,b),tier!=db";
  o.field_selector = "metadata.name=x";
  o.resource_version = "0";
  o.resource_version_match = "NotOlderThan";
  o.limit = 50;
  o.continue_token = "abc+/=";
  o.timeout_seconds = 300;
  o.allow_watch_bookmarks = true;
  o.send_initial_events = true;
  EXPECT_EQ(list_query(o, false),
            "labelSelector=app%20in%20%28a%2Cb%29%2Ctier%21%3Ddb&fieldSelector=metadata.name%3Dx&"
            "resourceVersion=0&"
            "resourceVersionMatch=NotOlderThan&limit=50&continue=abc%2B%2F%3D");
  EXPECT_EQ(list_query(o, true).substr(0, 8), "watch=1&");
  EXPECT_NE(list_query(o, true).find(
                "&allowWatchBookmarks=true&timeoutSeconds=300&sendInitialEvents=true"),
            std::string::npos);
  EXPECT_EQ(list_query(ListOptions{}, false), "");
}

TEST(RestClient, GetSendsUserAgentTokenAndDecodes) {
  FakeApiServer server;
  server.on("GET", "/api/v1/namespaces/ns/pods/p1",
            [](const Request&) { return Reply::json(minimal_pod_json("p1", "7")); });
  RestClientOptions options = unlimited();
  options.user_agent = "mesh-pilot/1.0 (kinformer/0.1)";
  RestClient client(server.cluster_config(static_credentials(token("t0ken"))), options);
  auto r = client.get(kPods, "ns", "p1");
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(r.value()->key(), "ns/p1");
  EXPECT_EQ(r.value()->metadata.resource_version, "7");
  auto req = server.requests().at(0);
  EXPECT_EQ(req.header("user-agent"), "mesh-pilot/1.0 (kinformer/0.1)");
  EXPECT_EQ(req.header("authorization"), "Bearer t0ken");
  EXPECT_EQ(req.header("accept"), "application/json");
}

TEST(RestClient, NotFoundIsApiError) {
  FakeApiServer server;
  RestClient client(server.cluster_config(), unlimited());
  auto r = client.get(kPods, "ns", "missing");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::api);
  EXPECT_EQ(r.error().http_status, 404);
  EXPECT_EQ(r.error().reason, "NotFound");
}

TEST(RestClient, TooManyRequestsPlainTextWithRetryAfter) {
  FakeApiServer server;
  server.on("GET", "/api/v1/pods", [](const Request&) {
    Reply r = Reply::text("Too many requests, please try again later.\n", 429);
    r.headers.emplace_back("Retry-After", "3");
    return r;
  });
  RestClient client(server.cluster_config(), unlimited());
  auto r = client.list(kPods, "");
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().is_too_many_requests());
  EXPECT_EQ(r.error().retry_after, 3s);
}

Reply page_reply(const std::vector<std::string>& names, const std::string& rv,
                 const std::string& cont) {
  std::string body = R"({"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":")" + rv +
                     R"(","continue":")" + cont + R"("},"items":[)";
  for (std::size_t i = 0; i < names.size(); ++i)
    body += (i ? "," : "") + minimal_pod_json(names[i], rv);
  return Reply::json(body + "]}");
}

TEST(RestClient, ListAllFollowsContinueTokens) {
  FakeApiServer server;
  server.on("GET", "/api/v1/namespaces/ns/pods", [](const Request& r) {
    auto c = r.param("continue").value_or("");
    if (c.empty()) return page_reply({"a", "b"}, "10", "c1");
    if (c == "c1") return page_reply({"c", "d"}, "10", "c2");
    return page_reply({"e"}, "10", "");
  });
  RestClient client(server.cluster_config(), unlimited());
  ListOptions o;
  o.limit = 2;
  o.resource_version = "0";
  auto r = client.list_all(kPods, "ns", o);
  ASSERT_TRUE(r) << r.error().to_string();
  ASSERT_EQ(r->items.size(), 5u);
  EXPECT_EQ(r->items[4]->metadata.name, "e");
  EXPECT_EQ(r->resource_version, "10");
  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 3u);
  EXPECT_EQ(reqs[0].param("resourceVersion"), "0");
  EXPECT_EQ(reqs[0].param("limit"), "2");
  EXPECT_FALSE(reqs[1].param("resourceVersion"));  // never resourceVersion together with continue
  EXPECT_EQ(reqs[1].param("continue"), "c1");
}

TEST(RestClient, ListAllRestartsOnceOnExpiredContinue) {
  FakeApiServer server;
  std::atomic<int> expiries{0};
  server.on("GET", "/api/v1/pods", [&](const Request& r) {
    auto c = r.param("continue").value_or("");
    if (c.empty()) return page_reply({"a"}, "20", "old");
    if (c == "old" && expiries++ == 0) {
      return Reply::api_status(410, "Expired", "The provided continue parameter is too old");
    }
    return page_reply({"b"}, "21", "");
  });
  RestClient client(server.cluster_config(), unlimited());
  auto r = client.list_all(kPods, "", limit(1));
  ASSERT_TRUE(r) << r.error().to_string();
  ASSERT_EQ(r->items.size(), 2u);  // a (relisted), b; the first "a" was discarded
  EXPECT_EQ(server.request_count(), 4u);

  // A second expiry is returned.
  server.on("GET", "/api/v1/pods", [](const Request& r) {
    if (r.param("continue")) return Reply::api_status(410, "Expired", "too old");
    return page_reply({"a"}, "20", "old");
  });
  auto again = client.list_all(kPods, "", limit(1));
  ASSERT_FALSE(again);
  EXPECT_TRUE(again.error().is_expired());
}

TEST(RestClient, CreateUpdatePatchDeletePathsAndBodies) {
  FakeApiServer server;
  server.on("POST", "/api/v1/namespaces/ns/pods",
            [](const Request& r) { return Reply::json(r.body, 201); });
  server.on("PUT", "/api/v1/namespaces/ns/pods/p",
            [](const Request& r) { return Reply::json(r.body); });
  server.on("PATCH", "/api/v1/namespaces/ns/pods/p",
            [](const Request&) { return Reply::json(minimal_pod_json("p", "9")); });
  server.on("DELETE", "/api/v1/namespaces/ns/pods/p",
            [](const Request&) { return Reply::json(R"({"kind":"Status","status":"Success"})"); });
  RestClient client(server.cluster_config(), unlimited());
  DynamicObject pod;
  pod.metadata.name = "p";
  pod.metadata.namespace_ = "ns";
  pod.json = minimal_pod_json("p", "");
  auto created = client.create(kPods, pod);
  ASSERT_TRUE(created) << created.error().to_string();
  EXPECT_EQ(created.value()->metadata.name, "p");
  ASSERT_TRUE(client.update(kPods, pod));
  ASSERT_TRUE(
      client.patch(kPods, "ns", "p", PatchType::merge, R"({"metadata":{"labels":{"a":"b"}}})"));
  ASSERT_TRUE(client.patch(kPods, "ns", "p", PatchType::json,
                           R"([{"op":"add","path":"/metadata/labels/a","value":"b"}])"));
  ASSERT_TRUE(client.delete_(kPods, "ns", "p"));
  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 5u);
  EXPECT_EQ(reqs[0].method, "POST");
  EXPECT_EQ(reqs[0].body, pod.json);
  EXPECT_EQ(reqs[0].header("content-type"), "application/json");
  EXPECT_EQ(reqs[1].method, "PUT");
  EXPECT_EQ(reqs[2].header("content-type"), "application/merge-patch+json");
  EXPECT_EQ(reqs[2].body, R"({"metadata":{"labels":{"a":"b"}}})");
  EXPECT_EQ(reqs[3].header("content-type"), "application/json-patch+json");
  EXPECT_EQ(reqs[4].method, "DELETE");
  EXPECT_EQ(reqs[4].path, "/api/v1/namespaces/ns/pods/p");
}

TEST(RestClient, WarningSurfacedOncePerResource) {
  FakeApiServer server;
  server.on("GET", "/api/v1/endpoints", [](const Request&) {
    Reply r =
        Reply::json(R"({"kind":"EndpointsList","metadata":{"resourceVersion":"1"},"items":[]})");
    r.headers.emplace_back(
        "Warning",
        R"(299 - "v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice")");
    return r;
  });
  std::vector<ApiWarning> seen;
  std::mutex mu;
  RestClientOptions options = unlimited();
  options.on_warning = [&](const ApiWarning& w) {
    std::lock_guard lock(mu);
    seen.push_back(w);
  };
  RestClient client(server.cluster_config(), options);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(client.list(kEndpoints, ""));
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].resource, "endpoints");
  EXPECT_EQ(seen[0].message,
            "v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice");
  EXPECT_EQ(client.warnings(), seen);
}

TEST(RestClient, GetRawReturnsStatusBodyHeaders) {
  FakeApiServer server;
  server.on("GET", "/metrics", [](const Request&) {
    Reply r = Reply::text("apiserver_longrunning_requests{verb=\"WATCH\"} 3\n");
    r.headers.emplace_back("X-Thing", "1");
    return r;
  });
  server.on("GET", "/readyz", [](const Request&) { return Reply::text("[-]etcd failed", 500); });
  RestClient client(server.cluster_config(), unlimited());
  auto m = client.get_raw("/metrics");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->status, 200);
  EXPECT_EQ(m->header("x-thing"), "1");
  EXPECT_NE(m->body.find("longrunning"), std::string::npos);
  auto ready = client.get_raw("/readyz?verbose");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 500);
}

TEST(RestClient, RequestDeadline) {
  FakeApiServer server;
  auto never = std::make_shared<ScriptedStream>();
  server.on("GET", "/slow", [never](const Request&) { return Reply::streaming(never); });
  RestClientOptions options = unlimited();
  options.request_timeout = 200ms;
  RestClient client(server.cluster_config(), options);
  auto r = client.get_raw("/slow");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::timeout);
}

class RotatingToken final : public CredentialsProvider {
 public:
  Result<Credentials> current() override {
    return token("token-" + std::to_string(generation.load()));
  }
  void invalidate() noexcept override { ++generation; }
  std::atomic<int> generation{0};
};

TEST(RestClient, RetriesOnceAfter401WithFreshCredentials) {
  FakeApiServer server;
  server.on("GET", "/api/v1/namespaces/ns/pods/p", [](const Request& r) {
    if (r.header("authorization") != "Bearer token-1")
      return Reply::api_status(401, "Unauthorized", "Unauthorized");
    return Reply::json(minimal_pod_json("p", "1"));
  });
  auto creds = std::make_shared<RotatingToken>();
  RestClient client(server.cluster_config(creds), unlimited());
  auto r = client.get(kPods, "ns", "p");
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(creds->generation.load(), 1);
  EXPECT_EQ(server.request_count(), 2u);
}

TEST(RestClient, RateLimiterDelaysNonWatchRequests) {
  FakeApiServer server;
  server.on("GET", "/x", [](const Request&) { return Reply::text("ok"); });
  auto now = std::make_shared<std::chrono::steady_clock::time_point>();
  auto limiter = std::make_shared<RateLimiter>(
      RateLimiter::Options{.qps = 1000, .burst = 2},
      std::make_shared<testing::FunctionClock>([now] { return *now; }));
  RestClientOptions options = unlimited();
  options.rate_limiter = limiter;
  RestClient client(server.cluster_config(), options);
  ASSERT_TRUE(client.get_raw("/x"));
  ASSERT_TRUE(client.get_raw("/x"));
  EXPECT_FALSE(limiter->try_acquire());  // both tokens were taken by the requests
}

// shutdown() wakes a request waiting for its rate-limiter token (20 s here) and fails it with
// Errc::cancelled, and every later request too. The limiter's clock tells when the request has
// reserved its token.
TEST(RestClient, ShutdownWakesRequestsWaitingForTheRateLimiter) {
  FakeApiServer server;
  server.on("GET", "/x", [](const Request&) { return Reply::text("ok"); });
  auto clock_calls = std::make_shared<std::atomic<int>>(0);
  auto limiter =
      std::make_shared<RateLimiter>(RateLimiter::Options{.qps = 0.05, .burst = 1},
                                    std::make_shared<testing::FunctionClock>([clock_calls] {
                                      ++*clock_calls;
                                      return std::chrono::steady_clock::time_point{};
                                    }));
  ASSERT_TRUE(limiter->try_acquire());  // the bucket is now empty
  RestClientOptions options = unlimited();
  options.rate_limiter = limiter;
  RestClient client(server.cluster_config(), options);
  auto waiting = std::async(std::launch::async, [&] { return client.get_raw("/x"); });
  while (clock_calls->load() < 3) std::this_thread::yield();  // constructor, try_acquire, reserve
  client.shutdown();
  // Only proves that it did not wait for its 20 s.
  ASSERT_EQ(waiting.wait_for(10s), std::future_status::ready);
  auto r = waiting.get();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::cancelled) << r.error().to_string();
  auto later = client.get_raw("/x");
  ASSERT_FALSE(later);
  EXPECT_EQ(later.error().code, Errc::cancelled) << later.error().to_string();
  auto watch = client.watch(kPods, "", {});
  ASSERT_FALSE(watch);
  EXPECT_EQ(watch.error().code, Errc::cancelled) << watch.error().to_string();
  EXPECT_EQ(server.request_count(), 0u);
}

// get_raw keys warnings by path, so a client polling many paths would remember them forever:
// the memory holds at most max_remembered_warnings (the oldest are forgotten first), and within
// it a repeated warning is still reported once.
TEST(RestClient, RememberedWarningsAreBounded) {
  FakeApiServer server;
  server.on("GET", "/w/*", [](const Request&) {
    Reply r = Reply::text("ok");
    r.headers.emplace_back("Warning", R"(299 - "this path is deprecated")");
    return r;
  });
  std::mutex mu;
  std::vector<ApiWarning> seen;
  RestClientOptions options = unlimited();
  options.max_remembered_warnings = 4;
  options.on_warning = [&](const ApiWarning& w) {
    std::lock_guard lock(mu);
    seen.push_back(w);
  };
  RestClient client(server.cluster_config(), options);
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 4; ++i) ASSERT_TRUE(client.get_raw("/w/" + std::to_string(i)));
  }
  EXPECT_EQ(seen.size(), 4u);
  EXPECT_EQ(client.warnings().size(), 4u);
  for (int i = 4; i < 40; ++i) {
    ASSERT_TRUE(client.get_raw("/w/" + std::to_string(i) + "?q=1"));
    ASSERT_TRUE(client.get_raw("/w/" + std::to_string(i)));  // the same resource: deduplicated
    ASSERT_LE(client.warnings().size(), 4u) << "after /w/" << i;
  }
  EXPECT_EQ(seen.size(), 40u);
  auto kept = client.warnings();
  ASSERT_EQ(kept.size(), 4u);
  EXPECT_EQ(kept.front().resource, "/w/36");  // the newest four, in arrival order
  EXPECT_EQ(kept.back().resource, "/w/39");
  ASSERT_TRUE(client.get_raw("/w/0"));  // forgotten long ago: reported again
  EXPECT_EQ(seen.size(), 41u);
}

// --- 401: one retry with fresh credentials, never more ---------------------------------------

TEST(RestClient, Persistent401IsRetriedExactlyOnce) {
  FakeApiServer server;
  server.on("GET", "/api/v1/namespaces/ns/pods/p",
            [](const Request&) { return Reply::api_status(401, "Unauthorized", "Unauthorized"); });
  auto creds = std::make_shared<RotatingToken>();
  RestClient client(server.cluster_config(creds), unlimited());
  auto r = client.get(kPods, "ns", "p");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().http_status, 401);
  EXPECT_EQ(creds->generation.load(), 1);
  ASSERT_EQ(server.request_count(), 2u);
  EXPECT_EQ(server.requests()[0].header("authorization"), "Bearer token-0");
  EXPECT_EQ(server.requests()[1].header("authorization"), "Bearer token-1");
}

TEST(RestClientWatch, Persistent401OnOpenIsRetriedExactlyOnce) {
  FakeApiServer server;
  server.on("GET", "/api/v1/pods",
            [](const Request&) { return Reply::api_status(401, "Unauthorized", "Unauthorized"); });
  auto creds = std::make_shared<RotatingToken>();
  RestClient client(server.cluster_config(creds), unlimited());
  auto w = client.watch(kPods, "", {});
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error().http_status, 401);
  EXPECT_EQ(creds->generation.load(), 1);
  ASSERT_EQ(server.request_count(), 2u);
  EXPECT_EQ(server.requests()[1].header("authorization"), "Bearer token-1");
}

// A 401 with credentials that fresh ones would not change (a token file nobody rotated, a static
// token) is not retried: the retry would get the same 401 and double the requests of a client
// whose token was revoked. The provider is still asked again (the file is re-read).
TEST(RestClient, Persistent401WithUnchangedTokenFileIsNotRetried) {
  testing::TempDir dir;
  auto path = dir.write("token", "revoked-token\n");
  FakeApiServer server;
  server.on("GET", "/api/v1/namespaces/ns/pods",
            [](const Request&) { return Reply::api_status(401, "Unauthorized", "Unauthorized"); });
  RestClient client(server.cluster_config(token_file_credentials(path)), unlimited());
  for (int i = 1; i <= 3; ++i) {
    auto r = client.list(kPods, "ns", {});
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().http_status, 401);
    EXPECT_EQ(server.request_count(), static_cast<std::size_t>(i)) << "list " << i;
  }
}

// The other half: a token file rotated in place so that its identity looks the same (same
// inode, size and mtime) is re-read after the 401, and the request is retried with the new token.
TEST(RestClient, List401AfterAnUnseenTokenFileRotationIsRetriedWithTheNewToken) {
  testing::TempDir dir;
  auto path = dir.write("token", "old-token");
  struct stat before {};
  ASSERT_EQ(::stat(path.c_str(), &before), 0);
  FakeApiServer server;
  server.on("GET", "/api/v1/namespaces/ns/pods", [](const Request& r) {
    if (r.header("authorization") != "Bearer new-token")
      return Reply::api_status(401, "Unauthorized", "Unauthorized");
    return Reply::json(R"({"kind":"PodList","metadata":{"resourceVersion":"5"},"items":[]})");
  });
  auto provider = token_file_credentials(path);
  ASSERT_EQ(provider->current()->token, "old-token");
  dir.write("token", "new-token");  // same size, same inode
  timespec times[2] = {before.st_atim, before.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0);  // and the same mtime: unseen
  RestClient client(server.cluster_config(provider), unlimited());
  auto r = client.list(kPods, "ns", {});
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(server.request_count(), 2u);
}

TEST(RestClientWatch, Persistent401OnOpenWithUnchangedTokenFileIsNotRetried) {
  testing::TempDir dir;
  auto path = dir.write("token", "revoked-token");
  FakeApiServer server;
  server.on("GET", "/api/v1/pods",
            [](const Request&) { return Reply::api_status(401, "Unauthorized", "Unauthorized"); });
  RestClient client(server.cluster_config(token_file_credentials(path)), unlimited());
  auto w = client.watch(kPods, "", {});
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error().http_status, 401);
  EXPECT_EQ(server.request_count(), 1u);
}

// An exec plugin's token was revoked: the 401 on opening the watch runs the plugin again and
// the watch opens with the new token.
TEST(RestClientWatch, Open401ReRunsTheExecPlugin) {
  testing::TempDir dir;
  auto plugin = testing::write_plugin(dir);
  dir.write("out.json",
            testing::exec_credential("client.authentication.k8s.io/v1", R"({"token":"tok-@N@"})"));
  ExecConfig exec;
  exec.api_version = "client.authentication.k8s.io/v1";
  exec.command = plugin;
  exec.origin = "test";
  FakeApiServer server;
  auto stream = std::make_shared<ScriptedStream>();
  server.on("GET", "/api/v1/pods", [stream](const Request& r) {
    if (r.header("authorization") != "Bearer tok-2")
      return Reply::api_status(401, "Unauthorized", "Unauthorized");
    return Reply::streaming(stream);
  });
  RestClient client(server.cluster_config(exec_credentials(exec)), unlimited());
  auto w = client.watch(kPods, "", {});
  ASSERT_TRUE(w) << w.error().to_string();
  EXPECT_EQ(testing::plugin_runs(dir), 2);
  ASSERT_EQ(server.request_count(), 2u);
  EXPECT_EQ(server.requests()[0].header("authorization"), "Bearer tok-1");
  stream->send(watch_event_line("ADDED", minimal_pod_json("a", "1")));
  auto e = (*w)->next();
  ASSERT_TRUE(e && e->has_value());
}

// --- the request rate limiter does not apply to watches --------------------------------------

// A limiter with burst 1 and a rate so low that its next token is ~17 minutes away; its clock
// never moves and its sleep is a latch. A GET takes the wait; while it waits, two watches open.
// A watch that went through the limiter would wait too (its sleep is recorded, then released).
TEST(RestClientWatch, WatchesAreNotRateLimited) {
  FakeApiServer server;
  server.on("GET", "/x", [](const Request&) { return Reply::text("ok"); });
  auto s1 = std::make_shared<ScriptedStream>();
  auto s2 = std::make_shared<ScriptedStream>();
  server.on("GET", "/api/v1/pods", [s1](const Request&) { return Reply::streaming(s1); });
  server.on("GET", "/api/v1/endpoints", [s2](const Request&) { return Reply::streaming(s2); });

  std::mutex mu;
  std::condition_variable cv;
  int sleeps = 0;
  bool release = false;
  auto sleep = [&](std::chrono::nanoseconds) {
    std::unique_lock lock(mu);
    ++sleeps;
    cv.notify_all();
    if (sleeps == 1) cv.wait(lock, [&] { return release; });  // only the first waiter blocks
  };
  auto limiter = std::make_shared<RateLimiter>(
      RateLimiter::Options{.qps = 0.001, .burst = 1},
      std::make_shared<testing::FunctionClock>(
          [] { return std::chrono::steady_clock::time_point{}; }, sleep));
  ASSERT_TRUE(limiter->try_acquire());  // the bucket is now empty
  RestClientOptions options = unlimited();
  options.rate_limiter = limiter;
  RestClient client(server.cluster_config(), options);

  Result<RawResponse> got = Error::make(Errc::network, "not run");
  std::thread getter([&] { got = client.get_raw("/x"); });
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, 10s, [&] { return sleeps == 1; }));
  }
  auto w1 = client.watch(kPods, "", {});
  auto w2 = client.watch(kEndpoints, "", {});
  int sleeps_during_watches = 0;
  {
    std::lock_guard lock(mu);
    sleeps_during_watches = sleeps;
    release = true;
    cv.notify_all();
  }
  getter.join();
  ASSERT_TRUE(w1) << w1.error().to_string();
  ASSERT_TRUE(w2) << w2.error().to_string();
  EXPECT_EQ(sleeps_during_watches, 1);  // only the GET waited
  ASSERT_TRUE(got) << got.error().to_string();
  EXPECT_EQ(got->status, 200);
  // The watches reached the server before the GET, which was still waiting for its token.
  auto requests = server.requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[2].path, "/x");
}

// --- size limits ----------------------------------------------------------------------------

TEST(RestClient, MaxResponseBytesRejectsAnOversizedList) {
  FakeApiServer server;
  std::string items;
  for (int i = 0; i < 40; ++i)
    items += (i ? "," : "") + minimal_pod_json("p" + std::to_string(i), "1");
  std::string body = R"({"metadata":{"resourceVersion":"9"},"items":[)" + items + "]}";
  ASSERT_GT(body.size(), 2048u);
  server.on("GET", "/api/v1/pods", [body](const Request&) { return Reply::json(body); });
  RestClientOptions options = unlimited();
  options.max_response_bytes = 2048;
  RestClient client(server.cluster_config(), options);
  auto r = client.list(kPods, "", {});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::too_large) << r.error().to_string();
  EXPECT_NE(r.error().message.find(
                "GET /api/v1/pods: response body exceeds max_response_bytes (2048 bytes)"),
            std::string::npos)
      << r.error().message;
  options.max_response_bytes = body.size();  // exactly at the limit: accepted
  RestClient roomy(server.cluster_config(), options);
  auto ok = roomy.list(kPods, "", {});
  ASSERT_TRUE(ok) << ok.error().to_string();
  EXPECT_EQ(ok->items.size(), 40u);
}

TEST(RestClientWatch, MaxWatchEventBytesEndsTheStreamWithTooLarge) {
  FakeApiServer server;
  auto stream = std::make_shared<ScriptedStream>();
  server.on("GET", "/api/v1/pods", [stream](const Request&) { return Reply::streaming(stream); });
  RestClientOptions options = unlimited();
  options.max_watch_event_bytes = 1024;
  RestClient client(server.cluster_config(), options);
  auto w = client.watch(kPods, "", {});
  ASSERT_TRUE(w) << w.error().to_string();
  std::string small = watch_event_line("ADDED", minimal_pod_json("a", "1"));
  std::string big =
      watch_event_line("ADDED", R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"b",)"
                                R"("namespace":"ns","resourceVersion":"2"},"spec":{"pad":")" +
                                    std::string(2000, 'x') + R"("}})");
  stream->send(small + big);
  auto e1 = (*w)->next();
  ASSERT_TRUE(e1 && e1->has_value()) << (e1 ? "end" : e1.error().to_string());
  auto e2 = (*w)->next();
  ASSERT_FALSE(e2);
  EXPECT_EQ(e2.error().code, Errc::too_large) << e2.error().to_string();
  EXPECT_NE(e2.error().message.find("watch event at byte offset " + std::to_string(small.size()) +
                                    " exceeds the limit of 1024 bytes"),
            std::string::npos)
      << e2.error().message;
  EXPECT_TRUE(stream->wait_client_closed(5s));  // the client gave up the connection
}

// While the reader takes nothing, the client buffers at most watch_queue_limit events and then
// stops reading the socket: the server cannot write the rest (its chunks are far more than the
// kernel's socket buffers hold). Once the reader drains the queue, reading resumes and every
// event arrives in order.
TEST(RestClientWatch, WatchQueueLimitStopsReadingTheSocket) {
  FakeApiServer server;
  auto stream = std::make_shared<ScriptedStream>();
  server.on("GET", "/api/v1/pods", [stream](const Request&) { return Reply::streaming(stream); });
  RestClientOptions options = unlimited();
  options.watch_queue_limit = 4;
  RestClient client(server.cluster_config(), options);
  auto w = client.watch(kPods, "", {});
  ASSERT_TRUE(w) << w.error().to_string();
  constexpr int kEvents = 64;
  constexpr std::size_t kPad = 512 * 1024;  // 64 x 512 KiB = 32 MiB in all; ~5 MiB stall in buffers
  for (int i = 1; i <= kEvents; ++i) {
    stream->send(padded_pod_event(i, kPad));
  }
  // Cannot become true while nobody reads: this only bounds how long the test looks.
  EXPECT_FALSE(stream->wait_drained(1500ms)) << stream->bytes_written() << " bytes written";
  std::size_t stalled_at = stream->bytes_written();
  EXPECT_LT(stalled_at, std::size_t{kEvents} * kPad / 2);
  for (int i = 1; i <= kEvents; ++i) {
    auto e = (*w)->next();
    ASSERT_TRUE(e && e->has_value())
        << "event " << i << ": " << (e ? "end" : e.error().to_string());
    ASSERT_EQ((*e)->object->metadata.resource_version, std::to_string(i));
  }
  EXPECT_TRUE(stream->wait_drained(5s));
  stream->end();
  auto end = (*w)->next();
  ASSERT_TRUE(end) << end.error().to_string();
  EXPECT_FALSE(end->has_value());
}

// The byte bound of the same queue: 4096 events of 1.5 MiB would be 6 GiB. With 512 KiB events
// and a 1 MiB bound the client stops reading after a few events, far below the event bound.
TEST(RestClientWatch, WatchQueueBytesLimitStopsReadingTheSocket) {
  FakeApiServer server;
  auto stream = std::make_shared<ScriptedStream>();
  server.on("GET", "/api/v1/pods", [stream](const Request&) { return Reply::streaming(stream); });
  RestClientOptions options = unlimited();
  options.watch_queue_bytes_limit = std::size_t{1} << 20;
  ASSERT_EQ(options.watch_queue_limit, 4096u);
  RestClient client(server.cluster_config(), options);
  auto w = client.watch(kPods, "", {});
  ASSERT_TRUE(w) << w.error().to_string();
  constexpr int kEvents = 64;
  constexpr std::size_t kPad = 512 * 1024;  // 64 x 512 KiB = 32 MiB in all
  for (int i = 1; i <= kEvents; ++i) {
    stream->send(padded_pod_event(i, kPad));
  }
  // Cannot become true while nobody reads: this only bounds how long the test looks.
  EXPECT_FALSE(stream->wait_drained(1500ms)) << stream->bytes_written() << " bytes written";
  EXPECT_LT(stream->bytes_written(), std::size_t{kEvents} * kPad / 2);
  for (int i = 1; i <= kEvents; ++i) {
    auto e = (*w)->next();
    ASSERT_TRUE(e && e->has_value())
        << "event " << i << ": " << (e ? "end" : e.error().to_string());
    ASSERT_EQ((*e)->object->metadata.resource_version, std::to_string(i));
  }
  EXPECT_TRUE(stream->wait_drained(5s));
  stream->end();
  auto end = (*w)->next();
  ASSERT_TRUE(end) << end.error().to_string();
  EXPECT_FALSE(end->has_value());
}

// --- waking the reader ---------------------------------------------------------------------
//
// The client wakes a watch's reader once per burst rather than once per read: while more bytes
// wait on the socket, a read's events are queued without waking it (watch_stream.cc,
// "Waking the reader").

std::string chunk(const std::string& bytes) {
  char size[32];
  std::snprintf(size, sizeof size, "%zx\r\n", bytes.size());
  return size + bytes + "\r\n";
}

// A burst written in one go, far more than one read takes: every event arrives, in order, and
// the last ones too while the stream stays open (the burst's end must wake the reader; nothing
// later would). Over plain HTTP and TLS.
void expect_a_burst_arrives_whole(bool tls) {
  testing::FakeApiServerOptions server_options;
  server_options.tls = tls;
  FakeApiServer server(std::move(server_options));
  auto stream = std::make_shared<ScriptedStream>();
  server.on("GET", "/api/v1/pods", [stream](const Request&) { return Reply::streaming(stream); });
  RestClient client(server.cluster_config(), unlimited());
  auto w = client.watch(kPods, "", {});
  ASSERT_TRUE(w) << w.error().to_string();
  constexpr int kEvents = 2000;
  std::string burst;
  for (int i = 1; i <= kEvents; ++i) burst += chunk(padded_pod_event(i, 300 + (i * 37) % 700));
  ASSERT_GT(burst.size(), std::size_t{1} << 20);
  stream->send_raw(std::move(burst));
  // Read on another thread, so that a lost wake-up fails here instead of hanging the test.
  auto reading = std::async(std::launch::async, [&]() -> std::string {
    for (int i = 1; i <= kEvents; ++i) {
      auto e = (*w)->next();
      if (!e || !e->has_value()) {
        return "event " + std::to_string(i) + ": " + (e ? "end" : e.error().to_string());
      }
      if ((*e)->object->metadata.resource_version != std::to_string(i)) {
        return "event " + std::to_string(i) + " has resourceVersion " +
               (*e)->object->metadata.resource_version;
      }
    }
    return "";
  });
  const bool done = reading.wait_for(10s) == std::future_status::ready;
  if (!done) stream->abort();  // unblocks next()
  const std::string failure = reading.get();
  ASSERT_TRUE(done) << "the burst's events did not all arrive while the stream stayed open";
  ASSERT_EQ(failure, "");
  EXPECT_EQ((*w)->buffered(), 0u);
  stream->end();
  auto end = (*w)->next();
  ASSERT_TRUE(end) << end.error().to_string();
  EXPECT_FALSE(end->has_value());
}

TEST(RestClientWatch, ABurstArrivesWholeAndInOrder) { expect_a_burst_arrives_whole(false); }
TEST(RestClientWatch, ABurstArrivesWholeAndInOrderOverTls) { expect_a_burst_arrives_whole(true); }

// Bytes waiting on the socket do not promise a read that returns: here they are the start of a
// chunk header whose end never comes (as the rest of a TLS record that is late). The event read
// before them must still reach the reader while the server says nothing more: the deferred
// wake-up is bounded in time. Without the bound the reader would wait for the stream's end.
TEST(RestClientWatch, AnEventBeforeAStalledPartialChunkStillReachesTheReader) {
  FakeApiServer server;
  auto stream = std::make_shared<ScriptedStream>();
  server.on("GET", "/api/v1/pods", [stream](const Request&) { return Reply::streaming(stream); });
  RestClient client(server.cluster_config(), unlimited());
  auto w = client.watch(kPods, "", {});
  ASSERT_TRUE(w) << w.error().to_string();
  // One write: a whole event, then a chunk-size line with a 512 KiB extension and no end of
  // line, far more than one read takes, so bytes still wait on the socket after the event.
  // Beast (1.81) puts no limit on a chunk extension's length and waits for the line's end; a
  // Beast that refused it would end the stream, wake the reader and leave the bound untested
  // (the mutant client-watch-deferred-wakeup-unbounded would then survive and say so).
  // The reader waits in next() first: an event already queued when next() starts would be
  // taken at once, signalled or not, and the bound would go untested. (Nothing can arrive
  // before send_raw, so next() cannot return early; the pause only orders the two.)
  auto first = std::async(std::launch::async, [&] { return (*w)->next(); });
  EXPECT_EQ(first.wait_for(200ms), std::future_status::timeout);
  stream->send_raw(chunk(padded_pod_event(1, 100)) + "40;x=" + std::string(512 * 1024, 'a'));
  const bool arrived = first.wait_for(10s) == std::future_status::ready;
  stream->abort();  // unblocks next() either way
  auto e = first.get();
  ASSERT_TRUE(arrived) << "the event waited for the stream to end";
  ASSERT_TRUE(e && e->has_value()) << (e ? "end" : e.error().to_string());
  EXPECT_EQ((*e)->object->metadata.name, "p1");
}

// --- stale keep-alive connections ---------------------------------------------------------

// Answers the first request on each connection and drops the connection at the next one, as a
// server that closes a kept-alive connection just as a request arrives on it: the client cannot
// see that coming (the connection had nothing to read when it was reused). Handlers made by one
// DropReused share what they have seen (they run on the server's thread, one at a time).
struct DropReused {
  std::shared_ptr<std::set<std::uint64_t>> seen = std::make_shared<std::set<std::uint64_t>>();
  testing::Handler answer(std::string body) const {
    return [seen = seen, body = std::move(body)](const Request& r) {
      return seen->insert(r.connection).second ? Reply::json(body) : Reply::dropped();
    };
  }
};

std::size_t count_method(const std::vector<Request>& requests, std::string_view method) {
  return static_cast<std::size_t>(std::count_if(
      requests.begin(), requests.end(), [&](const Request& r) { return r.method == method; }));
}

TEST(RestClient, StaleKeptAliveConnectionRetriesOnlyIdempotentRequests) {
  FakeApiServer server;
  DropReused drop;
  server.on("GET", "/api/v1/namespaces/ns/pods/a", drop.answer(minimal_pod_json("a", "1")));
  server.on("POST", "/api/v1/namespaces/ns/pods", drop.answer(minimal_pod_json("b", "2")));
  server.on("PATCH", "/api/v1/namespaces/ns/pods/a", drop.answer(minimal_pod_json("a", "3")));
  RestClient client(server.cluster_config(), unlimited());

  ASSERT_TRUE(client.get(kPods, "ns", "a"));

  // GET: lost on the kept connection, retried transparently on a new one.
  auto got = client.get(kPods, "ns", "a");
  ASSERT_TRUE(got) << got.error().to_string();
  EXPECT_EQ(server.request_count(), 3u);

  // POST: not retried; the caller gets the network error.
  DynamicObject pod;
  pod.metadata.name = "b";
  pod.metadata.namespace_ = "ns";
  pod.json = minimal_pod_json("b", "");
  auto created = client.create(kPods, pod);
  ASSERT_FALSE(created);
  EXPECT_EQ(created.error().code, Errc::network) << created.error().to_string();
  EXPECT_NE(created.error().message.find("not retried"), std::string::npos)
      << created.error().message;

  // That failure discarded the stale connection; a new one serves the next POST.
  ASSERT_TRUE(client.create(kPods, pod));

  // PATCH: not retried either.
  auto patched =
      client.patch(kPods, "ns", "a", PatchType::merge, R"({"metadata":{"labels":{"x":"y"}}})");
  ASSERT_FALSE(patched);
  EXPECT_EQ(patched.error().code, Errc::network) << patched.error().to_string();

  const auto requests = server.requests();
  EXPECT_EQ(count_method(requests, "GET"), 3u);    // the lost one was sent again
  EXPECT_EQ(count_method(requests, "POST"), 2u);   // one per create(): the lost one only once
  EXPECT_EQ(count_method(requests, "PATCH"), 1u);  // sent once, lost, never again
}

// A server may have applied a request before dropping the connection: only GET, HEAD and
// OPTIONS are replayed. A replayed PUT without a resourceVersion overwrites, and a replayed
// DELETE can delete an object recreated meanwhile under the same name.
TEST(RestClient, StaleKeptAliveConnectionDoesNotReplayPutOrDelete) {
  FakeApiServer server;
  DropReused drop;
  server.on("GET", "/api/v1/namespaces/ns/pods/a", drop.answer(minimal_pod_json("a", "1")));
  server.on("PUT", "/api/v1/namespaces/ns/pods/a", drop.answer(minimal_pod_json("a", "2")));
  server.on("DELETE", "/api/v1/namespaces/ns/pods/a", drop.answer(R"({"kind":"Status"})"));
  RestClient client(server.cluster_config(), unlimited());
  DynamicObject pod;
  pod.metadata.name = "a";
  pod.metadata.namespace_ = "ns";
  pod.json = minimal_pod_json("a", "");

  ASSERT_TRUE(client.get(kPods, "ns", "a"));
  auto updated = client.update(kPods, pod);  // on the kept connection, which the server drops
  ASSERT_FALSE(updated);
  EXPECT_EQ(updated.error().code, Errc::network) << updated.error().to_string();
  EXPECT_NE(updated.error().message.find("not retried: PUT"), std::string::npos)
      << updated.error().message;

  ASSERT_TRUE(client.get(kPods, "ns", "a"));
  auto deleted = client.delete_(kPods, "ns", "a");
  ASSERT_FALSE(deleted);
  EXPECT_EQ(deleted.error().code, Errc::network) << deleted.error().to_string();
  EXPECT_NE(deleted.error().message.find("not retried: DELETE"), std::string::npos)
      << deleted.error().message;

  const auto requests = server.requests();
  EXPECT_EQ(count_method(requests, "PUT"), 1u);
  EXPECT_EQ(count_method(requests, "DELETE"), 1u);
}

// Leaves two idle connections in `client`'s pool: the server holds the answer to a first GET
// until a second one, which cannot take the busy connection, has completed on a connection of
// its own. `close_after`: the server closes each connection after answering, without saying so
// (Connection: close), as an API server going down does.
void fill_pool_with_two_connections(FakeApiServer& server, RestClient& client, bool close_after) {
  auto gate = std::make_shared<testing::ReplyGate>();
  auto answer = [close_after](const std::string& name, std::shared_ptr<testing::ReplyGate> g) {
    return [name, close_after, g](const Request&) {
      Reply r = Reply::json(minimal_pod_json(name, "1"));
      r.close_after = close_after;
      r.gate = g;
      return r;
    };
  };
  server.on("GET", "/api/v1/namespaces/ns/pods/held", answer("held", gate));
  server.on("GET", "/api/v1/namespaces/ns/pods/quick", answer("quick", nullptr));
  auto held = std::async(std::launch::async, [&] { return client.get(kPods, "ns", "held"); });
  ASSERT_TRUE(server.wait_for_requests(1, 5s));
  auto quick = client.get(kPods, "ns", "quick");
  gate->open();
  auto first = held.get();
  ASSERT_TRUE(first) << first.error().to_string();
  ASSERT_TRUE(quick) << quick.error().to_string();
  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 2u);
  ASSERT_EQ(requests[0].connection, 1u);
  ASSERT_EQ(requests[1].connection, 2u);
}

// After an API-server restart every kept connection is dead. Each has the server's FIN waiting
// to be read: the client sees that before sending and connects afresh.
TEST(RestClient, GetSucceedsWhenTheServerClosedEveryKeptConnection) {
  FakeApiServer server;
  RestClient client(server.cluster_config(), unlimited());
  ASSERT_NO_FATAL_FAILURE(fill_pool_with_two_connections(server, client, /*close_after=*/true));
  ASSERT_TRUE(server.wait_for_open_connections(0, 5s));  // both pooled connections are dead

  server.on("GET", "/api/v1/namespaces/ns/pods/a",
            [](const Request&) { return Reply::json(minimal_pod_json("a", "2")); });
  auto got = client.get(kPods, "ns", "a");
  ASSERT_TRUE(got) << got.error().to_string();
  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 3u);  // nothing was sent on a dead connection
  EXPECT_EQ(requests[2].connection, 3u);
}

// A kept connection can look alive and still be gone (the server closed it as the request
// arrived, or its host went away without a FIN reaching us). The GET is retried on a new
// connection, not on the next kept one, which is as old and as likely dead: all are closed.
TEST(RestClient, RetryAfterADeadKeptConnectionUsesANewConnection) {
  FakeApiServer server;
  RestClient client(server.cluster_config(), unlimited());
  ASSERT_NO_FATAL_FAILURE(fill_pool_with_two_connections(server, client, /*close_after=*/false));

  server.on("GET", "/api/v1/namespaces/ns/pods/a", [](const Request& r) {
    // Connections 1 and 2 are the server's before its "restart": requests on them are lost.
    return r.connection <= 2 ? Reply::dropped() : Reply::json(minimal_pod_json("a", "2"));
  });
  auto got = client.get(kPods, "ns", "a");
  ASSERT_TRUE(got) << got.error().to_string();
  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 4u);  // once on a kept connection, once on a new one
  EXPECT_LE(requests[2].connection, 2u);
  EXPECT_EQ(requests[3].connection, 3u);
  // The other kept connection was closed by the client: only the new one stays open.
  EXPECT_TRUE(server.wait_for_open_connections(1, 5s));
}

// kube-apiserver closes connections idle for 90 s; a write sent on one as it closes is lost and
// not retried. The client reuses a connection idle for less than idle_connection_timeout
// (default 60 s) on its clock, and opens a new one after that.
TEST(RestClient, WriteAfterTheIdleTimeoutGoesOnANewConnection) {
  FakeApiServer server;
  server.on("GET", "/api/v1/namespaces/ns/pods/a",
            [](const Request&) { return Reply::json(minimal_pod_json("a", "1")); });
  // The server has closed its first connection by the time the writes come.
  auto writes = [](const Request& r) {
    return r.connection == 1 ? Reply::dropped() : Reply::json(minimal_pod_json("a", "2"));
  };
  server.on("PATCH", "/api/v1/namespaces/ns/pods/a", writes);
  server.on("PUT", "/api/v1/namespaces/ns/pods/a", writes);
  auto clock = std::make_shared<testing::FakeClock>();
  RestClientOptions options = unlimited();
  options.clock = clock;
  RestClient client(server.cluster_config(), options);

  ASSERT_TRUE(client.get(kPods, "ns", "a"));
  clock->advance(59s);
  ASSERT_TRUE(client.get(kPods, "ns", "a"));  // idle 59 s: reused
  clock->advance(60s);
  auto patched =
      client.patch(kPods, "ns", "a", PatchType::merge, R"({"metadata":{"labels":{"x":"y"}}})");
  ASSERT_TRUE(patched) << patched.error().to_string();
  clock->advance(61s);
  DynamicObject pod;
  pod.metadata.name = "a";
  pod.metadata.namespace_ = "ns";
  pod.json = minimal_pod_json("a", "2");
  auto updated = client.update(kPods, pod);
  ASSERT_TRUE(updated) << updated.error().to_string();

  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 4u);
  EXPECT_EQ(requests[1].connection, 1u);
  EXPECT_EQ(requests[2].method, "PATCH");
  EXPECT_EQ(requests[2].connection, 2u);
  EXPECT_EQ(requests[3].method, "PUT");
  EXPECT_EQ(requests[3].connection, 3u);
}

// A hostile proxy can nest arrays without end; the client's recursive parse must not follow.
TEST(RestClient, DeeplyNestedResponseIsADecodeError) {
  FakeApiServer server;
  std::string deep = std::string(1000, '[') + std::string(1000, ']');
  server.on("GET", "/api/v1/namespaces/ns/pods/a", [deep](const Request&) {
    return Reply::json(R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"},"spec":)" + deep +
                       "}");
  });
  RestClient client(server.cluster_config(), unlimited());
  auto r = client.get(kPods, "ns", "a");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::decode) << r.error().to_string();
  EXPECT_NE(r.error().message.find("nested deeper than " + std::to_string(kMaxJsonDepth)),
            std::string::npos)
      << r.error().message;
}

// --- watch ---------------------------------------------------------------------------------

struct WatchFixture : ::testing::Test {
  FakeApiServer server;
  std::shared_ptr<ScriptedStream> stream = std::make_shared<ScriptedStream>();
  std::unique_ptr<RestClient> client;
  void SetUp() override {
    server.on("GET", "/api/v1/namespaces/ns/pods", [s = stream](const Request& r) {
      if (r.param("watch") != "1") return Reply::json("{}", 400);
      return Reply::streaming(s);
    });
    client = std::make_unique<RestClient>(server.cluster_config(), unlimited());
  }
};

TEST_F(WatchFixture, StreamsEventsThenCleanEnd) {
  ListOptions o;
  o.resource_version = "5";
  o.allow_watch_bookmarks = true;
  o.timeout_seconds = 321;
  auto w = client->watch(kPods, "ns", o);
  ASSERT_TRUE(w) << w.error().to_string();
  std::string two = watch_event_line("ADDED", minimal_pod_json("a", "6")) +
                    watch_event_line("MODIFIED", minimal_pod_json("a", "7"));
  stream->send(two.substr(0, 30));
  stream->send(two.substr(30));
  auto e1 = (*w)->next();
  ASSERT_TRUE(e1);
  ASSERT_TRUE(e1->has_value());
  EXPECT_EQ((*e1)->type, EventType::added);
  auto e2 = (*w)->next();
  ASSERT_TRUE(e2 && e2->has_value());
  EXPECT_EQ((*e2)->object->metadata.resource_version, "7");
  stream->end();
  auto end = (*w)->next();
  ASSERT_TRUE(end) << end.error().to_string();
  EXPECT_FALSE(end->has_value());
  auto req = server.requests().at(0);
  EXPECT_EQ(req.param("resourceVersion"), "5");
  EXPECT_EQ(req.param("allowWatchBookmarks"), "true");
  EXPECT_EQ(req.param("timeoutSeconds"), "321");
}

TEST_F(WatchFixture, AbortIsTruncated) {
  auto w = client->watch(kPods, "ns", {});
  ASSERT_TRUE(w);
  stream->send(watch_event_line("ADDED", minimal_pod_json("a", "6")) + R"({"type":"ADDED","obj)");
  stream->abort();
  auto e1 = (*w)->next();
  ASSERT_TRUE(e1 && e1->has_value());
  auto e2 = (*w)->next();
  ASSERT_FALSE(e2);
  EXPECT_EQ(e2.error().code, Errc::truncated);
}

TEST_F(WatchFixture, ErrorEventEndsStream) {
  auto w = client->watch(kPods, "ns", {});
  ASSERT_TRUE(w);
  stream->send(watch_event_line(
      "ERROR",
      R"({"kind":"Status","code":410,"reason":"Expired","message":"too old resource version"})"));
  auto e = (*w)->next();
  ASSERT_FALSE(e);
  EXPECT_TRUE(e.error().is_expired());
  EXPECT_FALSE((*w)->next());  // finished
}

TEST_F(WatchFixture, CancelUnblocksNextAndClosesConnection) {
  auto w = client->watch(kPods, "ns", {});
  ASSERT_TRUE(w);
  std::thread canceller([&] {
    ASSERT_TRUE(stream->wait_started(5s));
    (*w)->cancel();
  });
  auto e = (*w)->next();
  canceller.join();
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().code, Errc::cancelled);
  // The real effect: the server saw the client close the connection (not merely "closed",
  // which the server's destructor also reports).
  EXPECT_TRUE(stream->wait_client_closed(5s));
  EXPECT_TRUE(server.wait_for_open_connections(0, 5s));
}

TEST_F(WatchFixture, DestroyingStreamReleasesConnection) {
  {
    auto w = client->watch(kPods, "ns", {});
    ASSERT_TRUE(w);
  }
  EXPECT_TRUE(stream->wait_client_closed(5s));
  EXPECT_TRUE(server.wait_for_open_connections(0, 5s));
}

TEST(RestClientWatch, InitialHttpErrorIsReturnedFromWatch) {
  FakeApiServer server;
  server.on("GET", "/api/v1/pods", [](const Request&) {
    return Reply::api_status(410, "Expired", "too old resource version: 1 (9)");
  });
  RestClient client(server.cluster_config(), unlimited());
  auto w = client.watch(kPods, "", {});
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error().http_status, 410);
  EXPECT_TRUE(w.error().is_expired());
  auto lw = client.lister_watcher(kPods, "");
  auto w2 = lw->watch({});
  ASSERT_FALSE(w2);
  EXPECT_TRUE(w2.error().is_expired());
}

TEST(RestClientWatch, ListerWatcherOutlivesClientAndWarnsOnWatch) {
  FakeApiServer server;
  auto stream = std::make_shared<ScriptedStream>();
  server.on("GET", "/api/v1/endpoints", [stream](const Request& r) {
    Reply reply = r.param("watch")
                      ? Reply::streaming(stream)
                      : Reply::json(R"({"metadata":{"resourceVersion":"3"},"items":[]})");
    reply.headers.emplace_back("Warning", R"(299 - "v1 Endpoints is deprecated")");
    return reply;
  });
  ListerWatcherPtr lw;
  {
    RestClient client(server.cluster_config(), unlimited());
    lw = client.lister_watcher(kEndpoints, "");
  }
  auto list = lw->list({});
  ASSERT_TRUE(list);
  EXPECT_EQ(list->resource_version, "3");
  auto w = lw->watch({});
  ASSERT_TRUE(w);
  stream->send(
      watch_event_line("BOOKMARK", R"({"kind":"Endpoints","metadata":{"resourceVersion":"4"}})"));
  auto e = (*w)->next();
  ASSERT_TRUE(e && e->has_value());
  EXPECT_EQ((*e)->type, EventType::bookmark);
}

// --- watch read-idle deadline ---------------------------------------------------------------

struct IdleWatchFixture : WatchFixture {
  void SetUp() override {
    WatchFixture::SetUp();
    use_idle_timeout(200ms);
  }
  void use_idle_timeout(std::chrono::milliseconds timeout) {
    RestClientOptions options = unlimited();
    options.watch_idle_timeout = timeout;
    client = std::make_unique<RestClient>(server.cluster_config(), options);
  }
};

TEST_F(IdleWatchFixture, SilentPeerTimesOutAndClosesConnection) {
  auto w = client->watch(kPods, "ns", {});
  ASSERT_TRUE(w) << w.error().to_string();
  stream->send(
      watch_event_line("ADDED", minimal_pod_json("a", "6")));  // then nothing: no end, no abort
  auto e1 = (*w)->next();
  ASSERT_TRUE(e1) << e1.error().to_string();
  ASSERT_TRUE(e1->has_value());
  EXPECT_EQ((*e1)->type, EventType::added);
  auto e2 = (*w)->next();
  ASSERT_FALSE(e2);
  EXPECT_EQ(e2.error().code, Errc::timeout);
  EXPECT_NE(e2.error().message.find("watch idle for 0.2s: no data from the server"),
            std::string::npos)
      << e2.error().message;
  EXPECT_TRUE(stream->wait_client_closed(5s));  // the client closed the connection
  EXPECT_TRUE(server.wait_for_open_connections(0, 5s));
}

TEST(RestClientWatch, SilentTlsPeerTimesOut) {
  testing::FakeApiServerOptions server_options;
  server_options.tls = true;
  FakeApiServer server(std::move(server_options));
  auto stream = std::make_shared<ScriptedStream>();
  server.on("GET", "/api/v1/pods", [stream](const Request&) { return Reply::streaming(stream); });
  RestClientOptions options = unlimited();
  options.watch_idle_timeout = 200ms;
  RestClient client(server.cluster_config(), options);
  auto w = client.watch(kPods, "", {});
  ASSERT_TRUE(w) << w.error().to_string();
  auto e = (*w)->next();
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().code, Errc::timeout) << e.error().to_string();
  EXPECT_TRUE(stream->wait_client_closed(5s));
}

TEST_F(IdleWatchFixture, SteadyTrafficIsNotCut) {
  // A wider deadline than the silent-peer tests: the gaps below are microseconds, but a loaded
  // CI machine under a sanitizer can stall a thread for a while; 400 ms keeps that from
  // looking like silence.
  use_idle_timeout(400ms);
  auto w = client->watch(kPods, "ns", {});
  ASSERT_TRUE(w) << w.error().to_string();
  // Ping-pong: each event is sent as soon as the previous one arrived, so gaps stay far below
  // the idle deadline while the stream as a whole outlives it three times: the deadline is
  // re-armed on every read, not set once per stream.
  auto start = std::chrono::steady_clock::now();
  int n = 0;
  while (std::chrono::steady_clock::now() - start < 1200ms) {
    stream->send(watch_event_line("MODIFIED", minimal_pod_json("a", std::to_string(++n))));
    auto e = (*w)->next();
    ASSERT_TRUE(e) << "after " << n << " events: " << e.error().to_string();
    ASSERT_TRUE(e->has_value());
  }
  stream->end();
  auto end = (*w)->next();
  ASSERT_TRUE(end) << end.error().to_string();
  EXPECT_FALSE(end->has_value());
}

}  // namespace
}  // namespace kinformer::client
