#include "audit_report.h"

#include <gtest/gtest.h>

#include <sstream>

namespace kinformer::tools {
namespace {

constexpr const char* kMetrics =
    "apiserver_longrunning_requests{group=\"\",resource=\"secrets\",scope=\"namespace\","
    "subresource=\"\",verb=\"WATCH\",version=\"v1\"} 5\n"
    "apiserver_longrunning_requests{group=\"discovery.k8s.io\",resource=\"endpointslices\",scope="
    "\"cluster\",subresource=\"\",verb=\"WATCH\",version=\"v1\"} 2\n"
    "apiserver_longrunning_requests{group=\"\",resource=\"pods\",scope=\"cluster\",subresource="
    "\"\",verb=\"WATCH\",version=\"v1\"} 2\n";

client::Result<client::RawResponse> response(int status, std::string body) {
  client::RawResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

struct Run {
  int code;
  std::string out;
  std::string err;
};

Run run(const client::Result<client::RawResponse>& r, AuditOptions o = {}) {
  std::ostringstream out, err;
  const int code = run_audit_on(r, o, "https://127.0.0.1:6443", out, err);
  return {code, out.str(), err.str()};
}

TEST(AuditReport, TableIsSortedWithTotalAndSource) {
  const auto table = format_audit_table(audit_watches(kMetrics));
  EXPECT_EQ(
      table,
      "# open watches from apiserver_longrunning_requests{verb=\"WATCH\"} (Kubernetes 1.25+)\n"
      "RESOURCE                             WATCHES\n"
      "secrets                              5\n"
      "discovery.k8s.io/v1/endpointslices   2\n"
      "pods                                 2\n"
      "TOTAL                                9\n");
}

TEST(AuditReport, TableNamesTheOldMetric) {
  const auto table = format_audit_table(audit_watches(
      "apiserver_registered_watchers{group=\"\",kind=\"Secret\",version=\"v1\"} 3\n"));
  EXPECT_NE(table.find("apiserver_registered_watchers (Kubernetes before 1.25)"), std::string::npos)
      << table;
  EXPECT_NE(table.find("Secret"), std::string::npos);
}

TEST(AuditReport, JsonDocument) {
  EXPECT_EQ(
      format_audit_json(audit_watches(kMetrics)),
      R"({"source":"apiserver_longrunning_requests","total":9,"resources":[)"
      R"({"resource":"secrets","count":5},{"resource":"discovery.k8s.io/v1/endpointslices","count":2},)"
      R"({"resource":"pods","count":2}]})"
      "\n");
  EXPECT_EQ(format_audit_json(WatchAudit{"apiserver_registered_watchers", {}}),
            R"({"source":"apiserver_registered_watchers","total":0,"resources":[]})"
            "\n");
}

TEST(AuditReport, MaxWatchesExitsOneAndNamesEachOffender) {
  AuditOptions o;
  o.max_watches = 2;
  auto r = run(response(200, kMetrics), o);
  EXPECT_EQ(r.code, kExitCheckFailed);
  EXPECT_NE(r.err.find("resource=secrets watches=5 max=2"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("pods"), std::string::npos) << "2 is not more than 2";
  EXPECT_NE(r.out.find("TOTAL"), std::string::npos) << "the table is printed anyway";

  o.max_watches = 5;
  EXPECT_EQ(run(response(200, kMetrics), o).code, kExitOk);
  o.max_watches = 1;
  r = run(response(200, kMetrics), o);
  EXPECT_EQ(r.code, kExitCheckFailed);
  EXPECT_NE(r.err.find("resource=pods"), std::string::npos);
  EXPECT_NE(r.err.find("resource=discovery.k8s.io/v1/endpointslices"), std::string::npos);
  EXPECT_EQ(over_limit(audit_watches(kMetrics), 1).size(), 3u);
}

TEST(AuditReport, JsonModeWritesOnlyJsonToStdout) {
  AuditOptions o;
  o.json = true;
  const auto r = run(response(200, kMetrics), o);
  EXPECT_EQ(r.code, kExitOk);
  EXPECT_EQ(r.out.front(), '{');
  EXPECT_TRUE(r.err.empty());
}

TEST(AuditReport, ForbiddenIsExitTwoWithAClearMessage) {
  const auto r = run(response(403, R"({"kind":"Status","code":403})"));
  EXPECT_EQ(r.code, kExitError);
  EXPECT_NE(r.err.find("no permission to read /metrics (needs get on nonResourceURL /metrics)"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(r.out.empty());
}

TEST(AuditReport, TransportFailuresAreExitTwo) {
  auto tls = run(client::Error::make(client::Errc::tls, "certificate verify failed"));
  EXPECT_EQ(tls.code, kExitError);
  EXPECT_NE(tls.err.find("TLS error talking to https://127.0.0.1:6443: certificate verify failed"),
            std::string::npos)
      << tls.err;
  auto down = run(client::Error::make(client::Errc::network, "connection refused"));
  EXPECT_EQ(down.code, kExitError);
  EXPECT_NE(down.err.find("cannot reach the API server at https://127.0.0.1:6443"),
            std::string::npos)
      << down.err;
  auto other = run(response(500, "boom\n"));
  EXPECT_EQ(other.code, kExitError);
  EXPECT_NE(other.err.find("HTTP 500: boom"), std::string::npos) << other.err;
}

TEST(AuditReport, MissingMetricFamiliesAreExitTwo) {
  const auto r = run(response(200, "up 1\n"));
  EXPECT_EQ(r.code, kExitError);
  EXPECT_NE(r.err.find("neither apiserver_longrunning_requests nor apiserver_registered_watchers"),
            std::string::npos);
  const auto bad = run(response(200, "broken{x=\"1\" 2\n"));
  EXPECT_EQ(bad.code, kExitError);
  EXPECT_NE(bad.err.find("cannot parse /metrics"), std::string::npos);
}

}  // namespace
}  // namespace kinformer::tools
