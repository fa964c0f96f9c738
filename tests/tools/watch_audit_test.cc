#include "watch_audit.h"

#include <gtest/gtest.h>

namespace kinformer::tools {
namespace {

constexpr const char* kModern =
    R"(# HELP apiserver_longrunning_requests [STABLE] Gauge of all active long-running apiserver requests
# TYPE apiserver_longrunning_requests gauge
apiserver_longrunning_requests{component="apiserver",group="",resource="secrets",scope="namespace",subresource="",verb="WATCH",version="v1"} 2
apiserver_longrunning_requests{component="apiserver",group="",resource="secrets",scope="cluster",subresource="",verb="WATCH",version="v1"} 3
apiserver_longrunning_requests{component="apiserver",group="discovery.k8s.io",resource="endpointslices",scope="cluster",subresource="",verb="WATCH",version="v1"} 1
apiserver_longrunning_requests{component="apiserver",group="",resource="pods",scope="namespace",subresource="log",verb="CONNECT",version="v1"} 4
apiserver_registered_watchers{group="",kind="Secret",version="v1"} 99
other_metric 1.5e3
)";

TEST(WatchAudit, SumsWatchSeriesPerResourceFromLongrunningRequests) {
  const auto audit = audit_watches(kModern);
  EXPECT_EQ(audit.source, "apiserver_longrunning_requests");
  ASSERT_EQ(audit.counts.size(), 2u);
  EXPECT_EQ(audit.counts[0].name(), "secrets");
  EXPECT_EQ(audit.counts[0].count, 5);
  EXPECT_EQ(audit.count("discovery.k8s.io/v1/endpointslices"), 1);
  EXPECT_EQ(audit.count("pods"), 0) << "CONNECT requests are not watches";
  EXPECT_EQ(audit.total(), 6);
}

TEST(WatchAudit, FallsBackToRegisteredWatchersOnOldServers) {
  const auto audit = audit_watches(
      "apiserver_registered_watchers{group=\"\",kind=\"Secret\",version=\"v1\"} 7\n"
      "apiserver_registered_watchers{group=\"apps\",kind=\"Deployment\",version=\"v1\"} 2\n");
  EXPECT_EQ(audit.source, "apiserver_registered_watchers");
  EXPECT_EQ(audit.count("Secret"), 7);
  EXPECT_EQ(audit.count("apps/v1/Deployment"), 2);
  EXPECT_EQ(audit.total(), 9);
}

TEST(WatchAudit, NeitherFamilyGivesEmptySource) {
  const auto audit = audit_watches("up 1\n");
  EXPECT_TRUE(audit.source.empty());
  EXPECT_TRUE(audit.counts.empty());
}

TEST(PrometheusText, ParsesEscapesAndSpecialValues) {
  const auto samples = parse_prometheus_text(
      "a{x=\"q\\\"uote\",y=\"back\\\\slash\",z=\"new\\nline\"} +Inf 1700000000\n\nb NaN\n");
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[0].labels.at("x"), "q\"uote");
  EXPECT_EQ(samples[0].labels.at("y"), "back\\slash");
  EXPECT_EQ(samples[0].labels.at("z"), "new\nline");
  EXPECT_TRUE(std::isinf(samples[0].value));
  EXPECT_TRUE(std::isnan(samples[1].value));
}

TEST(PrometheusText, MalformedLineNamesItsNumber) {
  try {
    parse_prometheus_text("ok 1\nbroken{x=\"1\" 2\n");
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_prometheus_text("m notanumber\n"), std::runtime_error);
}

}  // namespace
}  // namespace kinformer::tools
