#include "cache_dump.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli.h"
#include "kinformer/client/dynamic_object.h"

namespace kinformer::tools {
namespace {

client::ObjectPtr dyn(const std::string& ns, const std::string& name, const std::string& rv,
                      std::string json) {
  auto o = std::make_shared<client::DynamicObject>();
  o->metadata.namespace_ = ns;
  o->metadata.name = name;
  o->metadata.resource_version = rv;
  o->json = std::move(json);
  return o;
}

std::string secret_json(const std::string& ns, const std::string& name) {
  return R"({"metadata":{"name":")" + name + R"(","namespace":")" + ns +
         R"(","annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"data\":{\"password\":\"aHVudGVyMg==\"}}"}},)"
         R"("type":"Opaque","data":{"password":"aHVudGVyMg==","user":"YWRtaW4="},"stringData":{"x":"plain"}})";
}

TEST(ResolveResource, AliasesAndGroupVersionResource) {
  EXPECT_EQ(resolve_resource("pods").gvr.to_string(), "pods");
  EXPECT_EQ(resolve_resource("po").gvr.kind, "Pod");
  EXPECT_EQ(resolve_resource("secrets").gvr.kind, "Secret");
  EXPECT_EQ(resolve_resource("endpoints").gvr.kind, "Endpoints");
  EXPECT_EQ(resolve_resource("endpointslices").gvr.to_string(),
            "discovery.k8s.io/v1/endpointslices");
  EXPECT_FALSE(resolve_resource("secrets").needs_discovery);

  const auto deployments = resolve_resource("apps/v1/deployments");
  EXPECT_TRUE(deployments.needs_discovery);
  EXPECT_EQ(deployments.gvr.group, "apps");
  EXPECT_EQ(deployments.gvr.version, "v1");
  EXPECT_EQ(deployments.gvr.resource, "deployments");
  EXPECT_EQ(resolve_resource("v1/configmaps").gvr.group, "");
  EXPECT_EQ(resolve_resource("/v1/configmaps").gvr.to_string(), "configmaps");
  EXPECT_EQ(resolve_resource("batch/v1beta1/cronjobs").gvr.version, "v1beta1");
}

TEST(ResolveResource, UnknownNamesAreUsageErrorsNamingThem) {
  for (const char* bad : {"frobs", "apps/v1", "a/b/c/d", "apps//x", "Apps/v1/deployments",
                          "apps/x1/deployments", "v1beta/x"}) {
    try {
      resolve_resource(bad);
      ADD_FAILURE() << bad << " resolved";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("unknown resource '") + bad + "'"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(ResolveResource, DiscoveryFillsKindAndScope) {
  auto gvr = resolve_resource("v1/nodes").gvr;
  const char* doc = R"({"kind":"APIResourceList","groupVersion":"v1","resources":[
      {"name":"pods","namespaced":true,"kind":"Pod"},{"name":"nodes","namespaced":false,"kind":"Node"}]})";
  ASSERT_TRUE(apply_discovery(doc, gvr));
  EXPECT_EQ(gvr.kind, "Node");
  EXPECT_FALSE(gvr.namespaced);
  auto missing = resolve_resource("v1/frobs").gvr;
  EXPECT_FALSE(apply_discovery(doc, missing));
  EXPECT_FALSE(apply_discovery("not json", missing));
}

TEST(CacheDump, SecretDataAndStringDataAreRedacted) {
  const auto line =
      dump_line(*dyn("ns", "s", "1", secret_json("ns", "s")), {.secret_resource = true});
  EXPECT_EQ(line.find("aHVudGVyMg=="), std::string::npos) << line;
  EXPECT_EQ(line.find("YWRtaW4="), std::string::npos) << line;
  EXPECT_EQ(line.find("plain"), std::string::npos) << line;
  EXPECT_NE(line.find(R"("data":{"password":"<redacted>","user":"<redacted>"})"), std::string::npos)
      << line;
  EXPECT_NE(line.find(R"("stringData":{"x":"<redacted>"})"), std::string::npos) << line;
  EXPECT_NE(line.find(R"("type":"Opaque")"), std::string::npos) << "the rest is kept: " << line;
}

TEST(CacheDump, KindSecretIsRedactedEvenIfTheCallerDidNotSaySo) {
  const auto line =
      dump_line(*dyn("ns", "s", "1", R"({"kind":"Secret","data":{"k":"c2VjcmV0"}})"), {});
  EXPECT_EQ(line, R"({"kind":"Secret","data":{"k":"<redacted>"}})");
}

TEST(CacheDump, ShowSecretDataKeepsValues) {
  const auto line = dump_line(*dyn("ns", "s", "1", secret_json("ns", "s")),
                              {.secret_resource = true, .show_secret_data = true});
  EXPECT_NE(line.find("aHVudGVyMg=="), std::string::npos);
}

TEST(CacheDump, UnparsableSecretIsNeverEchoed) {
  EXPECT_EQ(redact_secret_json(R"({"data":{"k":"c2VjcmV0"})"),
            R"x({"error":"unparsable object (redacted)"})x");
}

TEST(CacheDump, LinesAreCompactAndSortedByNamespaceThenName) {
  std::vector<client::ObjectPtr> objects = {
      dyn("b", "a", "5", "{\n  \"metadata\": {\"name\": \"a\", \"namespace\": \"b\"}\n}"),
      dyn("a", "z", "3", R"({"metadata":{"name":"z","namespace":"a"}})"),
      dyn("a", "m", "4", R"({"metadata":{"name":"m","namespace":"a"}})"),
  };
  EXPECT_EQ(format_dump(objects, {}),
            "{\"metadata\":{\"name\":\"m\",\"namespace\":\"a\"}}\n"
            "{\"metadata\":{\"name\":\"z\",\"namespace\":\"a\"}}\n"
            "{\"metadata\":{\"name\":\"a\",\"namespace\":\"b\"}}\n");
  EXPECT_EQ(format_dump({}, {}), "");
}

TEST(CacheDump, EventLines) {
  const auto o = dyn("ns", "name", "42", "{}");
  EXPECT_EQ(format_event("ADDED", *o), "ADDED ns/name rv=42");
  EXPECT_EQ(format_event("DELETED", *o, true), "DELETED ns/name rv=42 final-state-unknown");
}

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(CacheDump, DumpFileReplacesRegularFilesAtomically) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("kwatch-dump-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto file = dir / "cache.jsonl";
  ASSERT_TRUE(write_dump_file(file.string(), "one\n"));
  ASSERT_TRUE(write_dump_file(file.string(), "two\n"));
  EXPECT_EQ(read(file), "two\n");
  EXPECT_FALSE(std::filesystem::exists(dir / "cache.jsonl.tmp"));
  EXPECT_FALSE(write_dump_file((dir / "missing" / "x.jsonl").string(), "x"));
  std::filesystem::remove_all(dir);
}

TEST(CacheDump, DumpFileWritesThroughSymlinksAndSpecialFilesInPlace) {
  // The same rule keeps /dev/null and /dev/stdout from being replaced by a regular file.
  const auto dir =
      std::filesystem::temp_directory_path() / ("kwatch-link-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto target = dir / "target.jsonl";
  const auto link = dir / "link.jsonl";
  { std::ofstream(target) << "old\n"; }
  std::filesystem::create_symlink(target, link);
  ASSERT_TRUE(write_dump_file(link.string(), "new\n"));
  EXPECT_TRUE(std::filesystem::is_symlink(link)) << "the symlink was replaced";
  EXPECT_EQ(read(target), "new\n");

  const auto fifo = dir / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string got;
  std::thread reader([&] { got = read(fifo); });
  ASSERT_TRUE(write_dump_file(fifo.string(), "through a fifo\n"));
  reader.join();
  EXPECT_EQ(got, "through a fifo\n");
  struct stat st {};
  ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode)) << "the FIFO was replaced by a regular file";
  std::filesystem::remove_all(dir);
}

client::Error api_error(int status) {
  client::Error e = client::Error::make(client::Errc::api, "the server said no");
  e.http_status = status;
  return e;
}

TEST(CacheSync, DumpGoesToDumpElseStdoutUnlessEvents) {
  EXPECT_EQ(dump_target(std::nullopt, false), "-");
  EXPECT_EQ(dump_target(std::nullopt, true), std::nullopt);
  EXPECT_EQ(dump_target("/tmp/x.jsonl", false), "/tmp/x.jsonl");
  EXPECT_EQ(dump_target("/tmp/x.jsonl", true), "/tmp/x.jsonl");
  EXPECT_EQ(dump_target("-", true), "-");
}

TEST(CacheSync, OnlyUnauthorizedForbiddenAndNotFoundArePermanent) {
  for (int status : {401, 403, 404}) EXPECT_TRUE(permanent_sync_error(api_error(status))) << status;
  for (int status : {400, 408, 410, 429, 500, 503, 504})
    EXPECT_FALSE(permanent_sync_error(api_error(status))) << status;
  EXPECT_FALSE(permanent_sync_error(client::Error::make(client::Errc::network, "refused")));
  EXPECT_FALSE(permanent_sync_error(client::Error::make(client::Errc::tls, "bad certificate")));
  auto not_api = client::Error::make(client::Errc::decode, "garbage");
  not_api.http_status = 403;  // only the server's answer counts
  EXPECT_FALSE(permanent_sync_error(not_api));
}

TEST(CacheSync, SyncWinsOverErrorsAndAPermanentErrorOverTheTimeout) {
  const std::optional<client::Error> none;
  const std::optional<client::Error> forbidden = api_error(403);
  const std::optional<client::Error> unavailable = api_error(503);
  EXPECT_EQ(sync_state(false, none, false), SyncState::syncing);
  EXPECT_EQ(sync_state(false, unavailable, false), SyncState::syncing);  // retried
  EXPECT_EQ(sync_state(false, forbidden, false), SyncState::failed);
  EXPECT_EQ(sync_state(false, forbidden, true), SyncState::failed);
  EXPECT_EQ(sync_state(false, none, true), SyncState::timed_out);
  EXPECT_EQ(sync_state(false, unavailable, true), SyncState::timed_out);
  EXPECT_EQ(sync_state(true, none, false), SyncState::synced);
  EXPECT_EQ(sync_state(true, forbidden, true), SyncState::synced);
}

TEST(CacheSync, ProgressLineClearsTheLineAndShowsTheLastErrorShortened) {
  using std::chrono::milliseconds;
  EXPECT_EQ(format_seconds(milliseconds(0)), "0.0s");
  EXPECT_EQ(format_seconds(milliseconds(1234)), "1.2s");
  EXPECT_EQ(format_seconds(milliseconds(12000)), "12.0s");

  EXPECT_EQ(format_sync_progress("pods", "all namespaces", milliseconds(1234), std::nullopt),
            "\r\x1b[Ksyncing pods (all namespaces) 1.2s");
  const auto unavailable = api_error(503);
  EXPECT_EQ(format_sync_progress("secrets", "mesh", milliseconds(3000), unavailable),
            "\r\x1b[Ksyncing secrets (mesh) 3.0s retrying after: " + unavailable.to_string());

  const auto long_error = client::Error::make(client::Errc::network, std::string(300, 'x'));
  const std::string prefix = "\r\x1b[Ksyncing pods (all namespaces) 0.5s retrying after: ";
  const auto line = format_sync_progress("pods", "all namespaces", milliseconds(500), long_error);
  ASSERT_EQ(line.substr(0, prefix.size()), prefix);
  EXPECT_EQ(line.substr(prefix.size()), long_error.to_string().substr(0, 100));
}

// kwatch cache says once when the cache turns stale and once when it is fresh again; a resync
// after staleness is not fresh yet.
TEST(CacheSync, FreshnessLinesComeOncePerChangeAndResyncingIsNotFresh) {
  using State = informer::Freshness::State;
  auto at = [](State s) {
    informer::Freshness f;
    f.state = s;
    return f;
  };
  bool stale = false;
  EXPECT_EQ(freshness_change(at(State::fresh), stale), FreshnessChange::none);
  EXPECT_EQ(freshness_change(at(State::stale), stale), FreshnessChange::stale);
  EXPECT_EQ(freshness_change(at(State::stale), stale), FreshnessChange::none);
  EXPECT_EQ(freshness_change(at(State::resyncing), stale), FreshnessChange::none);
  EXPECT_EQ(freshness_change(at(State::fresh), stale), FreshnessChange::fresh_again);
  EXPECT_EQ(freshness_change(at(State::fresh), stale), FreshnessChange::none);
  EXPECT_FALSE(stale);
}

}  // namespace
}  // namespace kinformer::tools
