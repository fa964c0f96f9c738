#include "audit_report.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

namespace kinformer::tools {
namespace {

std::string source_description(const std::string& source) {
  if (source == "apiserver_longrunning_requests")
    return "apiserver_longrunning_requests{verb=\"WATCH\"} (Kubernetes 1.25+)";
  if (source == "apiserver_registered_watchers")
    return "apiserver_registered_watchers (Kubernetes before 1.25)";
  return source;
}

std::string trimmed(std::string s, std::size_t max) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  if (s.size() > max) s = s.substr(0, max) + "...";
  return s;
}

}  // namespace

std::string format_audit_table(const WatchAudit& audit) {
  std::size_t width = std::string("RESOURCE").size();
  for (const auto& c : audit.counts) width = std::max(width, c.name().size());
  width += 3;
  std::ostringstream out;
  out << "# open watches from " << source_description(audit.source) << '\n';
  auto row = [&](const std::string& name, const std::string& value) {
    out << name << std::string(width - name.size(), ' ') << value << '\n';
  };
  row("RESOURCE", "WATCHES");
  for (const auto& c : audit.counts) row(c.name(), std::to_string(c.count));
  row("TOTAL", std::to_string(audit.total()));
  return out.str();
}

std::string format_audit_json(const WatchAudit& audit) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  w.StartObject();
  w.Key("source");
  w.String(audit.source.c_str(), static_cast<rapidjson::SizeType>(audit.source.size()));
  w.Key("total");
  w.Int64(audit.total());
  w.Key("resources");
  w.StartArray();
  for (const auto& c : audit.counts) {
    const std::string name = c.name();
    w.StartObject();
    w.Key("resource");
    w.String(name.c_str(), static_cast<rapidjson::SizeType>(name.size()));
    w.Key("count");
    w.Int64(c.count);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return std::string(buf.GetString(), buf.GetSize()) + "\n";
}

std::vector<WatchCount> over_limit(const WatchAudit& audit, long max_watches) {
  std::vector<WatchCount> out;
  for (const auto& c : audit.counts)
    if (c.count > max_watches) out.push_back(c);
  return out;
}

std::string metrics_failure(const client::Result<client::RawResponse>& response,
                            const std::string& server) {
  if (!response) return describe_error(response.error(), server);
  const int status = response->status;
  if (status == 200) return {};
  if (status == 403) return "no permission to read /metrics (needs get on nonResourceURL /metrics)";
  if (status == 401) return "unauthorized (HTTP 401): " + server + " rejected the credentials";
  return "GET /metrics from " + server + ": HTTP " + std::to_string(status) + ": " +
         trimmed(response->body, 200);
}

int run_audit_on(const client::Result<client::RawResponse>& response, const AuditOptions& options,
                 const std::string& server, std::ostream& out, std::ostream& err) {
  if (std::string failure = metrics_failure(response, server); !failure.empty()) {
    log_line(err, "error", failure, {{"server", server}});
    return kExitError;
  }
  WatchAudit audit;
  try {
    audit = audit_watches(response->body);
  } catch (const std::runtime_error& e) {
    log_line(err, "error", std::string("cannot parse /metrics: ") + e.what(), {{"server", server}});
    return kExitError;
  }
  if (audit.source.empty()) {
    log_line(
        err, "error",
        "/metrics has neither apiserver_longrunning_requests nor apiserver_registered_watchers: "
        "cannot count watches",
        {{"server", server}});
    return kExitError;
  }
  out << (options.json ? format_audit_json(audit) : format_audit_table(audit));
  out.flush();
  if (options.max_watches) {
    const auto over = over_limit(audit, *options.max_watches);
    for (const auto& c : over)
      log_line(err, "error", "too many open watches",
               {{"resource", c.name()},
                {"watches", std::to_string(c.count)},
                {"max", std::to_string(*options.max_watches)}});
    if (!over.empty()) return kExitCheckFailed;
  }
  return kExitOk;
}

}  // namespace kinformer::tools
