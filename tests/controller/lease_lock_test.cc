// LeaseLock: the Lease's JSON in and out, and its requests against the scripted FakeApiServer.
#include "kinformer/controller/lease_lock.h"

#include <gtest/gtest.h>

#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "fake_apiserver.h"
#include "fake_leases.h"
#include "fakes.h"

namespace kinformer::testing {
namespace {

using namespace std::chrono_literals;
using controller::LeaderElectionRecord;
using controller::LeaseLock;
using controller::MicroTime;

TEST(MicroTimeTest, FormatsMicrosecondsInUtcAndReadsThemBack) {
  const MicroTime t = MicroTime(std::chrono::seconds(1'714'557'600)) + 123456us;
  EXPECT_EQ(controller::format_micro_time(t), "2024-05-01T10:00:00.123456Z");
  EXPECT_EQ(controller::format_micro_time(MicroTime(std::chrono::seconds(1'714'557'600)) + 7us),
            "2024-05-01T10:00:00.000007Z");
  EXPECT_EQ(controller::parse_micro_time("2024-05-01T10:00:00.123456Z"), t);
  EXPECT_EQ(controller::parse_micro_time("2024-05-01T12:00:00.1234567+02:00"), t);
  EXPECT_EQ(controller::parse_micro_time("2024-05-01T10:00:00.5Z"),
            MicroTime(std::chrono::seconds(1'714'557'600)) + 500ms);
  EXPECT_EQ(controller::parse_micro_time("2024-05-01T10:00:00Z"),
            MicroTime(std::chrono::seconds(1'714'557'600)));
  EXPECT_FALSE(controller::parse_micro_time("yesterday"));
}

TEST(LeaseJsonTest, ARecordIsReadFromTheSpecAndAbsentFieldsAreDefaults) {
  auto r = controller::lease_record_from_json(
      R"({"metadata":{"name":"x"},"spec":{"holderIdentity":"a","leaseDurationSeconds":15,)"
      R"("renewTime":"2024-05-01T10:00:00.000001Z","leaseTransitions":4}})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->holder_identity, "a");
  EXPECT_EQ(r->lease_duration_seconds, 15);
  EXPECT_EQ(r->leader_transitions, 4);
  EXPECT_FALSE(r->acquire_time);
  EXPECT_EQ(r->renew_time, MicroTime(std::chrono::seconds(1'714'557'600)) + 1us);
  auto empty = controller::lease_record_from_json(R"({"metadata":{"name":"x"}})");
  ASSERT_TRUE(empty);
  EXPECT_EQ(*empty, LeaderElectionRecord{});
  auto bad = controller::lease_record_from_json(R"({"spec":{"leaseDurationSeconds":"15"}})");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, client::Errc::decode);
  EXPECT_NE(bad.error().message.find("leaseDurationSeconds"), std::string::npos);
}

TEST(LeaseJsonTest, WritingARecordKeepsEverythingElse) {
  LeaderElectionRecord r;
  r.holder_identity = "";
  r.lease_duration_seconds = 1;
  r.renew_time = MicroTime(std::chrono::seconds(1'714'557'600));
  auto json = controller::lease_json_with_record(
      R"({"metadata":{"name":"x","resourceVersion":"7","labels":{"app":"c"}},)"
      R"("spec":{"holderIdentity":"a","acquireTime":"2024-01-01T00:00:00.000000Z",)"
      R"("strategy":"OldestEmulationVersion"}})",
      r);
  ASSERT_TRUE(json);
  EXPECT_NE(json->find(R"("resourceVersion":"7")"), std::string::npos) << *json;
  EXPECT_NE(json->find(R"("labels":{"app":"c"})"), std::string::npos) << *json;
  EXPECT_NE(json->find(R"("strategy":"OldestEmulationVersion")"), std::string::npos) << *json;
  EXPECT_NE(json->find(R"("holderIdentity":"")"), std::string::npos) << *json;
  EXPECT_EQ(json->find("acquireTime"), std::string::npos) << *json;
  auto back = controller::lease_record_from_json(*json);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, r);
}

TEST(LeaseLockTest, CreatesReadsAndUpdatesWithTheResourceVersionItLastSaw) {
  FakeApiServer server;
  FakeLeases leases(server);
  client::RestClientOptions o;
  o.rate_limit.qps = 0;
  auto c = std::make_shared<client::RestClient>(server.cluster_config(), o);
  LeaseLock lock(c, "ns", "l");
  EXPECT_EQ(lock.describe(), "ns/l");
  LeaderElectionRecord r;
  r.holder_identity = "a";
  r.lease_duration_seconds = 15;
  auto missing = lock.get();
  ASSERT_FALSE(missing);
  EXPECT_TRUE(controller::is_not_found(missing.error()));
  ASSERT_TRUE(lock.create(r));
  auto again = lock.create(r);
  ASSERT_FALSE(again);
  EXPECT_TRUE(controller::is_conflict(again.error()));
  auto got = lock.get();
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, r);
  r.leader_transitions = 1;
  ASSERT_TRUE(lock.update(r));
  EXPECT_EQ(leases.record("ns", "l")->leader_transitions, 1);
  // Another writer: the next update is based on a stale resourceVersion.
  leases.put("ns", "l", R"({"holderIdentity":"b","leaseDurationSeconds":15})");
  auto stale = lock.update(r);
  ASSERT_FALSE(stale);
  EXPECT_TRUE(controller::is_conflict(stale.error()));
  EXPECT_EQ(leases.record("ns", "l")->holder_identity, "b");
  ASSERT_TRUE(lock.get());
  ASSERT_TRUE(lock.update(r));
  EXPECT_EQ(leases.record("ns", "l")->holder_identity, "a");
}

TEST(LeaseLockTest, AWatchTellsTheRecordAfterItsListAndEachEventUntilDestroyed) {
  FakeApiServer server;
  const std::string lease_a =
      R"({"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"l",)"
      R"("namespace":"ns","resourceVersion":"5"},"spec":{"holderIdentity":"a",)"
      R"("leaseDurationSeconds":15,"leaseTransitions":2}})";
  const std::string lease_b =
      R"({"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"l",)"
      R"("namespace":"ns","resourceVersion":"6"},"spec":{"holderIdentity":"b",)"
      R"("leaseDurationSeconds":15,"leaseTransitions":3}})";
  auto stream = std::make_shared<ScriptedStream>();
  std::mutex mu;
  int watches = 0;
  std::optional<Request> list;
  server.on("GET", "/apis/coordination.k8s.io/v1/namespaces/ns/leases", [&](const Request& r) {
    std::lock_guard l(mu);
    if (r.param("watch")) {
      // The first watch is the test's; later ones (after the client hangs up) stay silent.
      return Reply::streaming(watches++ == 0 ? stream : std::make_shared<ScriptedStream>());
    }
    list = r;
    return Reply::json(R"({"kind":"LeaseList","apiVersion":"coordination.k8s.io/v1",)"
                       R"("metadata":{"resourceVersion":"5"},"items":[)" +
                       lease_a + "]}");
  });
  client::RestClientOptions o;
  o.rate_limit.qps = 0;
  LeaseLock lock(std::make_shared<client::RestClient>(server.cluster_config(), o), "ns", "l",
                 [](const client::LogRecord&) {});
  std::vector<std::optional<std::string>> told;  // holders; nullopt: gone
  auto holders = [&] {
    std::lock_guard l(mu);
    return told;
  };
  auto watch = lock.watch([&](const std::optional<LeaderElectionRecord>& r) {
    std::lock_guard l(mu);
    told.push_back(r ? std::optional<std::string>(r->holder_identity) : std::nullopt);
  });
  ASSERT_TRUE(watch);
  using Told = std::vector<std::optional<std::string>>;
  ASSERT_TRUE(eventually([&] { return holders() == Told{"a"}; }));
  {
    std::lock_guard l(mu);
    ASSERT_TRUE(list);
    EXPECT_EQ(list->param("fieldSelector"), "metadata.name=l");
  }
  stream->send(watch_event_line("MODIFIED", lease_b));
  ASSERT_TRUE(eventually([&] { return holders() == Told{"a", "b"}; }));
  stream->send(watch_event_line("DELETED", lease_b));
  ASSERT_TRUE(eventually([&] { return holders() == Told{"a", "b", std::nullopt}; }));
  watch.reset();  // stops and joins: no call after this
  stream->send(watch_event_line("ADDED", lease_a));
  EXPECT_EQ(holders().size(), 3u);
}

TEST(LeaseLockTest, UpdateBeforeAnyReadIsNotFound) {
  FakeApiServer server;
  LeaseLock lock(std::make_shared<client::RestClient>(server.cluster_config()), "ns", "l");
  auto s = lock.update({});
  ASSERT_FALSE(s);
  EXPECT_TRUE(controller::is_not_found(s.error()));
  EXPECT_THROW(LeaseLock(nullptr, "ns", "l"), client::ConfigError);
  EXPECT_THROW(LeaseLock(std::make_shared<client::RestClient>(server.cluster_config()), "", "l"),
               client::ConfigError);
}

}  // namespace
}  // namespace kinformer::testing
