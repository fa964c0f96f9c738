// The client against a real API server: CRUD on the resources mesh components read, watches
// counted by the server itself, 403s, TLS failures and deprecation warnings.

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "base64.h"
#include "certs.h"
#include "e2e_env.h"
#include "kinformer/client/rest_client.h"
#include "kinformer/client/secret.h"

namespace kinformer::e2e {
namespace {

using client::ListOptions;

class ClientE2E : public ::testing::Test {
 protected:
  void SetUp() override { ns_ = create_namespace(client_, "client-e2e"); }

  client::RestClient client_{admin_config(), {.user_agent = "kinformer-e2e/0.1"}};
  std::string ns_;
};

std::string secret_json(const std::string& ns, const std::string& name, const std::string& app) {
  return R"({"apiVersion":"v1","kind":"Secret","metadata":{"name":")" + name +
         R"(","namespace":")" + ns + R"(","labels":{"app":")" + app +
         R"("}},"type":"Opaque","data":{"k":"dmFsdWU="}})";
}

// create -> get -> list with a selector -> update -> merge patch -> json patch -> delete -> 404.
void exercise_crud(client::RestClient& c, const client::ResourceType& type, const std::string& ns,
                   const std::string& name, const std::string& json) {
  SCOPED_TRACE(type.gvr.to_string());
  auto created = c.create(type, *object(ns, name, json));
  ASSERT_TRUE(created) << created.error().to_string();
  EXPECT_EQ((*created)->metadata.name, name);
  EXPECT_FALSE((*created)->metadata.uid.empty());

  auto got = c.get(type, ns, name);
  ASSERT_TRUE(got) << got.error().to_string();
  EXPECT_EQ((*got)->metadata.uid, (*created)->metadata.uid);

  auto listed = c.list_all(type, ns, ListOptions{.label_selector = "app=e2e"});
  ASSERT_TRUE(listed) << listed.error().to_string();
  ASSERT_EQ(listed->items.size(), 1u);
  EXPECT_EQ(listed->items[0]->metadata.name, name);
  EXPECT_FALSE(listed->resource_version.empty());

  auto patched = c.patch(type, ns, name, client::PatchType::merge,
                         R"({"metadata":{"labels":{"stage":"merged"}}})");
  ASSERT_TRUE(patched) << patched.error().to_string();
  ASSERT_NE(client::find_value((*patched)->metadata.labels, "stage"), nullptr);
  EXPECT_EQ(*client::find_value((*patched)->metadata.labels, "stage"), "merged");

  auto json_patched = c.patch(type, ns, name, client::PatchType::json,
                              R"([{"op":"add","path":"/metadata/annotations","value":{"a":"b"}}])");
  ASSERT_TRUE(json_patched) << json_patched.error().to_string();
  ASSERT_NE(client::find_value((*json_patched)->metadata.annotations, "a"), nullptr);

  // update: PUT the object as last read, with a changed label.
  auto current = std::static_pointer_cast<const client::DynamicObject>(*json_patched);
  std::string body = current->json;
  const auto pos = body.find(R"("app":"e2e")");
  ASSERT_NE(pos, std::string::npos) << body;
  body.replace(pos, 11, R"("app":"e2u")");
  auto updated = c.update(type, *object(ns, name, body));
  ASSERT_TRUE(updated) << updated.error().to_string();
  EXPECT_EQ(*client::find_value((*updated)->metadata.labels, "app"), "e2u");
  EXPECT_NE((*updated)->metadata.resource_version, (*created)->metadata.resource_version);

  auto deleted = c.delete_(type, ns, name);
  ASSERT_TRUE(deleted) << deleted.error().to_string();
  auto gone = c.get(type, ns, name);
  if (gone) {
    // Pods without a kubelet linger with a deletionTimestamp until the grace period passes.
    EXPECT_TRUE((*gone)->metadata.deletion_timestamp.has_value());
  } else {
    EXPECT_EQ(gone.error().http_status, 404) << gone.error().to_string();
  }
}

TEST_F(ClientE2E, CrudOnSecretsPodsEndpointsAndEndpointSlices) {
  exercise_crud(client_, secrets(), ns_, "s1", secret_json(ns_, "s1", "e2e"));
  exercise_crud(
      client_, pods(), ns_, "p1",
      R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p1","labels":{"app":"e2e"}},)"
      R"("spec":{"containers":[{"name":"c","image":"example.invalid/app:1"}]}})");
  exercise_crud(
      client_, endpoints(), ns_, "e1",
      R"({"apiVersion":"v1","kind":"Endpoints","metadata":{"name":"e1","labels":{"app":"e2e"}},)"
      R"("subsets":[{"addresses":[{"ip":"10.1.0.1"}],"ports":[{"port":80}]}]})");
  exercise_crud(
      client_, endpoint_slices(), ns_, "es1",
      R"({"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"es1",)"
      R"("labels":{"app":"e2e","kubernetes.io/service-name":"svc"}},"addressType":"IPv4",)"
      R"("endpoints":[{"addresses":["10.1.0.2"],"conditions":{"ready":true}}],)"
      R"("ports":[{"name":"http","port":80,"protocol":"TCP"}]})");
}

// kube-apiserver compresses a response over 128 KiB for a client that accepts gzip (level 1;
// RestClientOptions::gzip, on by default). 40 Secrets of 4 KiB each: a list of ~230 KB.
TEST_F(ClientE2E, LargeListsArriveGzippedAndDecodeToTheUncompressedList) {
  client::RestClient writer(admin_config(), fast_client_options());
  std::mt19937 rng(42);
  for (int i = 0; i < 40; ++i) {
    std::string bytes(4096, '\0');
    for (char& c : bytes) c = static_cast<char>('a' + rng() % 8);  // compresses, as real data does
    const std::string name = "big-" + std::to_string(i);
    auto created = writer.create(
        secrets(),
        *object(ns_, name,
                R"({"apiVersion":"v1","kind":"Secret","metadata":{"name":")" + name +
                    R"("},"type":"Opaque","data":{"k":")" + testing::base64(bytes) + R"("}})"));
    ASSERT_TRUE(created) << created.error().to_string();
  }
  const std::string path = "/api/v1/namespaces/" + ns_ + "/secrets";
  auto gzipped = client_.get_raw(path);
  ASSERT_TRUE(gzipped) << gzipped.error().to_string();
  ASSERT_EQ(gzipped->status, 200);
  EXPECT_EQ(gzipped->content_encoding, "gzip");
  EXPECT_EQ(gzipped->header("Content-Encoding"), "");

  client::RestClientOptions no_gzip = fast_client_options();
  no_gzip.gzip = false;
  client::RestClient plain(admin_config(), no_gzip);
  auto identity = plain.get_raw(path);
  ASSERT_TRUE(identity) << identity.error().to_string();
  EXPECT_EQ(identity->content_encoding, "");
  EXPECT_GT(identity->body.size(), std::size_t{128} * 1024);
  // The same list but for its resourceVersion (the cluster's etcd revision, which any write
  // anywhere moves: leases, events). Compared without printing 230 KB on a failure.
  auto without_list_rv = [](std::string body) {
    const std::string key = R"("resourceVersion":")";
    const auto at = body.find(key);  // the list's metadata comes before its items
    if (at != std::string::npos) body.erase(at, body.find('"', at + key.size()) - at);
    return body;
  };
  EXPECT_TRUE(without_list_rv(gzipped->body) == without_list_rv(identity->body))
      << "the gzip-decoded list differs from the plain one (" << gzipped->body.size() << " vs "
      << identity->body.size() << " bytes)";

  // The typed list asks for protobuf and gzip, and decodes both.
  auto listed = client_.list(client::ResourceTraits<client::Secret>::type(), ns_);
  ASSERT_TRUE(listed) << listed.error().to_string();
  std::size_t big = 0;
  for (const auto& item : listed->items) {
    const auto& secret = dynamic_cast<const client::Secret&>(*item);
    if (secret.metadata.name.rfind("big-", 0) != 0) continue;
    ++big;
    const auto value = secret.data.find("k");
    ASSERT_TRUE(value.has_value()) << secret.metadata.name;
    EXPECT_EQ(value->size(), 4096u) << secret.metadata.name;
  }
  EXPECT_EQ(big, 40u);
}

TEST_F(ClientE2E, WatchSeesChangesInOrder) {
  auto listed = client_.list(secrets(), ns_);
  ASSERT_TRUE(listed) << listed.error().to_string();
  auto watch = client_.watch(secrets(), ns_,
                             {.resource_version = listed->resource_version,
                              .timeout_seconds = 60,
                              .allow_watch_bookmarks = true});
  ASSERT_TRUE(watch) << watch.error().to_string();

  ASSERT_TRUE(client_.create(secrets(), *object(ns_, "w1", secret_json(ns_, "w1", "e2e"))));
  ASSERT_TRUE(client_.patch(secrets(), ns_, "w1", client::PatchType::merge,
                            R"({"metadata":{"labels":{"v":"2"}}})"));
  ASSERT_TRUE(client_.delete_(secrets(), ns_, "w1"));

  std::vector<client::EventType> seen;
  while (seen.size() < 3) {
    auto next = (*watch)->next();
    ASSERT_TRUE(next) << next.error().to_string();
    ASSERT_TRUE(next->has_value()) << "watch ended early";
    if ((*next)->type == client::EventType::bookmark) continue;
    EXPECT_EQ((*next)->object->metadata.name, "w1");
    seen.push_back((*next)->type);
  }
  EXPECT_EQ(seen, (std::vector{client::EventType::added, client::EventType::modified,
                               client::EventType::deleted}));
}

TEST_F(ClientE2E, OneWatchMovesTheServersWatchCountByExactlyOne) {
  const long before = server_watches(client_, "secrets");
  {
    auto watch = client_.watch(secrets(), ns_, {.timeout_seconds = 300});
    ASSERT_TRUE(watch) << watch.error().to_string();
    EXPECT_EQ(wait_for_server_watches(client_, "secrets", before + 1), before + 1);
    (*watch)->cancel();
  }
  EXPECT_EQ(wait_for_server_watches(client_, "secrets", before), before);
}

TEST_F(ClientE2E, StreamingListEndsWithTheInitialEventsBookmark) {
  ASSERT_TRUE(client_.create(secrets(), *object(ns_, "a", secret_json(ns_, "a", "e2e"))));
  ASSERT_TRUE(client_.create(secrets(), *object(ns_, "b", secret_json(ns_, "b", "e2e"))));
  auto watch = client_.watch(secrets(), ns_,
                             {.resource_version_match = "NotOlderThan",
                              .timeout_seconds = 60,
                              .allow_watch_bookmarks = true,
                              .send_initial_events = true});
  ASSERT_TRUE(watch) << watch.error().to_string();
  std::vector<std::string> names;
  while (true) {
    auto next = (*watch)->next();
    ASSERT_TRUE(next) << next.error().to_string();
    ASSERT_TRUE(next->has_value());
    const auto& ev = **next;
    if (ev.type == client::EventType::bookmark) {
      const auto* end =
          client::find_value(ev.object->metadata.annotations, "k8s.io/initial-events-end");
      if (end != nullptr && *end == "true") break;
      continue;
    }
    EXPECT_EQ(ev.type, client::EventType::added);
    names.push_back(ev.object->metadata.name);
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"a", "b"}));
}

TEST_F(ClientE2E, RestrictedUserGetsForbiddenWithTheServersMessage) {
  auto restricted = restricted_config();
  if (!restricted)
    GTEST_SKIP() << "KUBECONFIG has no 'restricted' context (the embedded launcher's has)";
  client::RestClient c(*restricted);
  auto listed = c.list(secrets(), ns_);
  ASSERT_FALSE(listed);
  EXPECT_EQ(listed.error().code, client::Errc::api);
  EXPECT_EQ(listed.error().http_status, 403);
  EXPECT_EQ(listed.error().reason, "Forbidden");
  EXPECT_NE(listed.error().message.find("cannot list resource \"secrets\""), std::string::npos)
      << listed.error().message;
  auto watch = c.watch(secrets(), ns_, {});
  ASSERT_FALSE(watch);
  EXPECT_EQ(watch.error().http_status, 403);
}

TEST_F(ClientE2E, WrongCaFailsTheHandshakeAndSaysWhy) {
  auto config = admin_config();
  config.ca_pem = testing::make_ca("not-the-cluster-ca").cert_pem;
  client::RestClient c(config);
  auto listed = c.list(secrets(), ns_);
  ASSERT_FALSE(listed);
  EXPECT_EQ(listed.error().code, client::Errc::tls) << listed.error().to_string();
  EXPECT_NE(listed.error().message.find("certificate verify failed"), std::string::npos)
      << listed.error().message;
}

TEST_F(ClientE2E, EndpointsDeprecationWarningIsSurfacedOncePerResource) {
  std::vector<client::ApiWarning> callbacks;
  client::RestClient c(
      admin_config(), {.on_warning = [&](const client::ApiWarning& w) { callbacks.push_back(w); }});
  ASSERT_TRUE(c.list(endpoints(), ns_));
  ASSERT_TRUE(c.list(endpoints(), ns_));
  ASSERT_TRUE(c.list(endpoints(), ""));
  ASSERT_EQ(callbacks.size(), 1u) << "one warning per resource, not per request";
  EXPECT_EQ(callbacks[0].resource, "endpoints");
  EXPECT_NE(callbacks[0].message.find("deprecated"), std::string::npos) << callbacks[0].message;
  EXPECT_EQ(c.warnings(), callbacks);
}

TEST_F(ClientE2E, CompactedResourceVersionIsExpired) {
  if (!launcher_available())
    GTEST_SKIP() << "needs the embedded launcher's `compact` (not available on kind)";
  // The launcher runs kube-apiserver without a watch cache for EndpointSlices
  // (--watch-cache-sizes=endpointslices.discovery.k8s.io#0), so their watches are served by etcd
  // and a compacted resourceVersion is 410 at once, as it is on any server once the watch
  // cache's window has moved on.
  auto listed = client_.list(endpoint_slices(), ns_);
  ASSERT_TRUE(listed);
  const std::string old_rv = listed->resource_version;
  ASSERT_TRUE(client_.create(secrets(), *object(ns_, "c1", secret_json(ns_, "c1", "e2e"))));
  ASSERT_EQ(launcher("compact"), 0);
  auto watch =
      client_.watch(endpoint_slices(), ns_, {.resource_version = old_rv, .timeout_seconds = 5});
  client::Error error;
  if (!watch) {
    error = watch.error();
  } else {
    auto next = (*watch)->next();
    ASSERT_FALSE(next) << "expected a 410 ERROR event, got an event or a clean end";
    error = next.error();
  }
  EXPECT_TRUE(error.is_expired()) << error.to_string();
  EXPECT_EQ(error.http_status, 410) << error.to_string();
}

}  // namespace
}  // namespace kinformer::e2e
