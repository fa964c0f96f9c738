#include "demo_report.h"

#include <gtest/gtest.h>

namespace kinformer::tools {
namespace {

DemoSnapshot snapshot(bool unshared, long watches) {
  DemoSnapshot s;
  s.namespace_ = "kinformer-demo-1";
  s.unshared = unshared;
  s.components = 20;
  s.handlers = 60;
  s.elapsed_seconds = 3;
  s.duration_seconds = 20;
  for (const char* r : {"secrets", "pods", "endpointslices"})
    s.rows.push_back({r, 7, 100, watches});
  return s;
}

TEST(DemoReport, SharedOk) {
  const auto v = demo_verdict(snapshot(false, 1), {});
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_EQ(v.line,
            "verdict: OK — 20 components, 60 handlers, 1 server watch per resource "
            "(secrets=1 pods=1 endpointslices=1); caches match the server");
}

TEST(DemoReport, SharedWithMoreThanOneWatchFails) {
  auto s = snapshot(false, 1);
  s.rows[1].server_watches = 2;
  const auto v = demo_verdict(s, {});
  EXPECT_EQ(v.exit_code, 1);
  EXPECT_NE(v.line.find("verdict: FAILED"), std::string::npos);
  EXPECT_NE(v.line.find("pods=2"), std::string::npos);
}

TEST(DemoReport, UnsharedIsMultipliedAndExpected) {
  const auto v = demo_verdict(snapshot(true, 20), {});
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_EQ(v.line,
            "verdict: MULTIPLIED — 20 components opened 20 watches per resource "
            "(secrets=20 pods=20 endpointslices=20); caches match the server");
}

TEST(DemoReport, DivergedCachesFail) {
  const auto v = demo_verdict(snapshot(false, 1), {"pods (1 caches differ)"});
  EXPECT_EQ(v.exit_code, 1);
  EXPECT_NE(v.line.find("caches did NOT converge: pods (1 caches differ)"), std::string::npos)
      << v.line;
  EXPECT_EQ(demo_verdict(snapshot(true, 20), {"secrets"}).exit_code, 1);
}

TEST(DemoReport, TableAndTick) {
  auto s = snapshot(false, 1);
  s.rows[2].server_watches = -1;
  EXPECT_EQ(
      format_demo_table(s, 55, 0),
      "kwatch demo  namespace=kinformer-demo-1  mode=shared  t=3s/20s  churn ops=55 errors=0\n"
      "COMPONENTS 20   HANDLERS 60\n"
      "RESOURCE        OBJECTS   EVENTS      SERVER WATCHES\n"
      "secrets         7         100         1\n"
      "pods            7         100         1\n"
      "endpointslices  7         100         ?\n");
  EXPECT_EQ(format_demo_tick(s),
            "t=3s components=20 handlers=60 secrets(objects=7 events=100 watches=1) "
            "pods(objects=7 events=100 watches=1) endpointslices(objects=7 events=100 watches=?)");
}

TEST(DemoReport, EraseLinesMovesUpAndClearsOnlyWhenSomethingWasDrawn) {
  EXPECT_EQ(erase_lines(0), "");
  EXPECT_EQ(erase_lines(6), "\x1b[6F\x1b[J");
}

TEST(DemoReport, CacheDivergenceCountsTheCachesThatDifferFromTheServer) {
  const ObjectVersions server = {{"a", "10"}, {"b", "11"}};
  EXPECT_EQ(cache_divergence("pods", server, {server}), std::nullopt);
  EXPECT_EQ(cache_divergence("pods", server, {server, server, server}), std::nullopt);
  EXPECT_EQ(cache_divergence("pods", {}, {{}, {}}), std::nullopt);

  const ObjectVersions stale = {{"a", "10"}, {"b", "9"}};                // an older resourceVersion
  const ObjectVersions missing = {{"a", "10"}};                          // a create not seen yet
  const ObjectVersions extra = {{"a", "10"}, {"b", "11"}, {"c", "12"}};  // a delete not seen
  EXPECT_EQ(cache_divergence("pods", server, {server, stale}), "pods (1 caches differ)");
  EXPECT_EQ(cache_divergence("secrets", server, {missing, server, extra}),
            "secrets (2 caches differ)");
  EXPECT_EQ(cache_divergence("pods", server, {stale, missing, extra}), "pods (3 caches differ)");
}

TEST(DemoReport, ListFailureIsADivergenceNamingTheError) {
  EXPECT_EQ(list_failed_divergence("endpointslices", "HTTP 503"),
            "endpointslices (list failed: HTTP 503)");
  const auto v = demo_verdict(snapshot(false, 1), {list_failed_divergence("pods", "timeout")});
  EXPECT_EQ(v.exit_code, 1);
  EXPECT_NE(v.line.find("caches did NOT converge: pods (list failed: timeout)"), std::string::npos)
      << v.line;
}

TEST(DemoReport, WatchesSettleOnOnePerResourceSharedAndOnePerComponentUnshared) {
  EXPECT_TRUE(watches_settled(snapshot(false, 1)));
  EXPECT_FALSE(watches_settled(snapshot(false, 0)));  // not counted by the server yet
  EXPECT_FALSE(watches_settled(snapshot(false, 2)));
  EXPECT_FALSE(watches_settled(snapshot(false, -1)));  // /metrics unreadable

  auto one_late = snapshot(false, 1);
  one_late.rows[2].server_watches = 0;
  EXPECT_FALSE(watches_settled(one_late));

  EXPECT_TRUE(watches_settled(snapshot(true, 20)));  // snapshot() has 20 components
  EXPECT_FALSE(watches_settled(snapshot(true, 19)));
  EXPECT_FALSE(watches_settled(snapshot(true, 1)));
}

}  // namespace
}  // namespace kinformer::tools
