// kwatch clusters / endpoints: argument parsing and rendering (pure functions).
#include "mesh_report.h"

#include <gtest/gtest.h>

#include "cli.h"

namespace kinformer::tools {
namespace {

std::string report_usage_error(const std::vector<std::string>& args) {
  try {
    parse_args(args);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(MeshCli, ParsesEndpointsAndClusters) {
  auto e = std::get<EndpointsOptions>(parse_args(
      {"endpoints", "reviews", "-n", "bookinfo", "--port", "http", "--subset", "version=v2",
       "--watch", "--json", "--secret-namespace", "istio-system", "--secret-selector",
       "istio/multiCluster=true", "--local-id", "east", "--timeout", "5"}));
  EXPECT_EQ(e.service, "reviews");
  EXPECT_EQ(e.namespace_, "bookinfo");
  EXPECT_EQ(e.port, "http");
  EXPECT_EQ(e.subset, "version=v2");
  EXPECT_TRUE(e.watch);
  EXPECT_TRUE(e.json);
  EXPECT_EQ(e.registry.secret_namespace, "istio-system");
  EXPECT_EQ(e.registry.secret_selector, "istio/multiCluster=true");
  EXPECT_EQ(e.registry.local_id, "east");
  EXPECT_EQ(e.registry.timeout_seconds, 5);
  auto c = std::get<ClustersOptions>(parse_args({"clusters", "--json"}));
  EXPECT_TRUE(c.json);
  EXPECT_EQ(c.registry.secret_namespace, "kinformer-system");
  EXPECT_EQ(c.registry.secret_selector, "kinformer.io/multicluster=true");
}

TEST(MeshCli, EndpointsNeedsAServiceAndANamespace) {
  EXPECT_NE(report_usage_error({"endpoints", "-n", "ns"}).find("the service name is required"),
            std::string::npos);
  EXPECT_NE(report_usage_error({"endpoints", "svc"}).find("-n NAMESPACE is required"),
            std::string::npos);
  EXPECT_NE(report_usage_error({"endpoints", "svc", "other", "-n", "ns"})
                .find("unexpected argument 'other'"),
            std::string::npos);
  EXPECT_NE(report_usage_error({"clusters", "--timeout", "0"}).find("--timeout must be between"),
            std::string::npos);
}

mesh::EndpointSnapshot mesh_snapshot() {
  mesh::EndpointSnapshot s;
  s.service = {"bookinfo", "reviews"};
  s.port_name = "http";
  s.version = 42;
  auto west = std::make_shared<mesh::ClusterEndpoints>();
  west->cluster = "west";
  mesh::Endpoint e;
  e.address = "10.1.0.7";
  e.ports = {{"http", 9080, "TCP", ""}};
  e.ready = false;
  e.serving = true;
  e.terminating = true;
  e.zone = "zone-a";
  west->endpoints.push_back(e);
  auto east = std::make_shared<mesh::ClusterEndpoints>();  // a shard with no endpoint
  east->cluster = "east";
  auto east_freshness = std::make_shared<mesh::ClusterFreshness>();
  east_freshness->set([] {  // not heard from for 95 s; west's parts have no freshness: "-"
    informer::Freshness f;
    f.state = informer::Freshness::State::stale;
    f.last_contact = informer::Clock::TimePoint(std::chrono::seconds(5));
    f.age = std::chrono::milliseconds(95'400);
    return f;
  });
  east->freshness = east_freshness;
  s.clusters = {{"east", east}, {"west", west}};
  return s;
}

TEST(MeshReport, EndpointsTableHasARowPerEndpointAndAnExplicitEmptyRow) {
  std::string t = render_endpoints_table(mesh_snapshot());
  EXPECT_EQ(t,
            "snapshot 42  service bookinfo/reviews  port http  subset (all)\n"
            "CLUSTER  ADDRESS   PORT  READY  SERVING  TERMINATING  ZONE    FRESHNESS\n"
            "east     (empty)   -     -      -        -            -       stale 95s\n"
            "west     10.1.0.7  9080  false  true     true         zone-a  -\n");
  mesh::EndpointSnapshot none;
  none.service = {"ns", "svc"};
  EXPECT_NE(render_endpoints_table(none).find("(no cluster has a shard for this service)"),
            std::string::npos);
}

TEST(MeshReport, EndpointsJsonKeepsTheEmptyShard) {
  EXPECT_EQ(
      render_endpoints_json(mesh_snapshot()),
      R"({"version":42,"service":"bookinfo/reviews","port":"http","subset":"","clusters":[)"
      R"({"cluster":"east","freshness":{"state":"stale","age_seconds":95},"endpoints":[]},)"
      R"({"cluster":"west","freshness":null,"endpoints":[{"address":"10.1.0.7","port":9080,"ready":false,"serving":true,)"
      R"("terminating":true,"zone":"zone-a","node":""}]}]})"
      "\n");
}

// A forgotten service (no slice in any cluster for the index's grace period) says so, in both
// forms; a service that exists prints as before.
TEST(MeshReport, AForgottenServiceSaysSo) {
  mesh::EndpointSnapshot gone;
  gone.service = {"ns", "svc"};
  gone.port_name = "http";
  gone.version = 7;
  gone.forgotten = true;
  EXPECT_NE(render_endpoints_table(gone).find("(forgotten: no cluster has had a slice"),
            std::string::npos)
      << render_endpoints_table(gone);
  EXPECT_EQ(render_endpoints_json(gone),
            R"({"version":7,"service":"ns/svc","port":"http","subset":"","clusters":[],)"
            R"("forgotten":true})"
            "\n");
}

TEST(MeshReport, ClustersTableAndJsonNameStateReasonAndWatches) {
  std::vector<ClusterRow> rows;
  informer::Freshness fresh;
  fresh.state = informer::Freshness::State::fresh;
  fresh.last_contact = informer::Clock::TimePoint(std::chrono::seconds(1));
  fresh.age = std::chrono::milliseconds(3'900);
  rows.push_back({.status = {.id = "local",
                             .local = true,
                             .state = mesh::ClusterState::synced,
                             .informers = 1,
                             .freshness = fresh},
                  .process_watches = 1,
                  .server_watches = 12});
  rows.push_back({.status = {.id = "evil",
                             .state = mesh::ClusterState::refused,
                             .reason = "exec is refused",
                             .secret = "mesh/remotes"},
                  .server_watches_error = "no client"});
  std::string t = render_clusters_table(rows);
  EXPECT_EQ(t,
            "CLUSTER        STATE    FRESHNESS  SECRET        WATCHES  SERVER-WATCHES  REASON\n"
            "local (local)  synced   fresh 3s   -             1        12              -\n"
            "evil           refused  -          mesh/remotes  0        ?               exec is "
            "refused\n");
  informer::Freshness half;  // one informer stale, another never heard from its server
  half.state = informer::Freshness::State::stale;
  half.age = std::chrono::milliseconds(95'000);
  rows.push_back(
      {.status = {.id = "west", .state = mesh::ClusterState::synced, .freshness = half}});
  EXPECT_NE(render_clusters_table(rows).find("west           synced   stale"), std::string::npos)
      << render_clusters_table(rows);
  rows.pop_back();
  std::string j = render_clusters_json(rows);
  EXPECT_NE(
      j.find(
          R"({"id":"evil","local":false,"state":"refused","freshness":null,"reason":"exec is refused","secret":"mesh/remotes","generation":0,"process_watches":0,"server_watches":null})"),
      std::string::npos)
      << j;
  EXPECT_NE(j.find(R"("state":"synced","freshness":{"state":"fresh","age_seconds":3})"),
            std::string::npos)
      << j;
}

}  // namespace
}  // namespace kinformer::tools
