#include "mesh_report.h"

#include <chrono>
#include <cstdio>
#include <sstream>

namespace kinformer::tools {
namespace {

std::string quoted(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned char>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

const char* yes_no(bool b) { return b ? "true" : "false"; }

// Left-aligned columns sized to their widest cell.
std::string columns(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width;
  for (const auto& r : rows) {
    width.resize(std::max(width.size(), r.size()));
    for (std::size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  }
  std::string out;
  for (const auto& r : rows) {
    std::string line;
    for (std::size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line += std::string(width[i] - r[i].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

// Nothing to say: resyncing and never in contact (no informer yet, or no client).
bool unknown(const informer::Freshness& f) {
  return !f.last_contact && f.state == informer::Freshness::State::resyncing;
}

// "fresh 3s", "stale 95s": the state and the whole seconds since the server was last heard from
// (the oldest contact among the informers); the state alone when one never heard from it ("stale"
// for a cluster with one stale informer and one still waiting for its first answer); "-" when
// there is nothing to say.
std::string freshness_cell(const informer::Freshness& f) {
  if (unknown(f)) return "-";
  std::string out(informer::to_string(f.state));
  if (!f.last_contact) return out;
  const auto age = std::chrono::duration_cast<std::chrono::seconds>(f.age).count();
  return out + " " + std::to_string(age) + "s";
}

// ,"freshness":{"state":"stale","age_seconds":95} (age null without contact), or
// ,"freshness":null when there is nothing to say.
std::string freshness_json(const informer::Freshness& f) {
  if (unknown(f)) return ",\"freshness\":null";
  const std::string age =
      f.last_contact
          ? std::to_string(std::chrono::duration_cast<std::chrono::seconds>(f.age).count())
          : "null";
  return ",\"freshness\":{\"state\":" + quoted(informer::to_string(f.state)) +
         ",\"age_seconds\":" + age + "}";
}

informer::Freshness freshness_of(const mesh::ClusterEndpoints& part) {
  return part.freshness ? part.freshness->get() : informer::Freshness{};
}

std::string port_of(const mesh::Endpoint& e, const std::string& name) {
  const mesh::EndpointPort* p = e.port(name);
  return p ? std::to_string(p->port) : "-";
}

}  // namespace

std::string render_clusters_table(const std::vector<ClusterRow>& rows) {
  std::vector<std::vector<std::string>> cells{
      {"CLUSTER", "STATE", "FRESHNESS", "SECRET", "WATCHES", "SERVER-WATCHES", "REASON"}};
  for (const auto& r : rows) {
    const auto& s = r.status;
    cells.push_back({s.id + (s.local ? " (local)" : ""), std::string(mesh::to_string(s.state)),
                     freshness_cell(s.freshness), s.secret.empty() ? "-" : s.secret,
                     std::to_string(r.process_watches),
                     r.server_watches < 0 ? "?" : std::to_string(r.server_watches),
                     s.reason.empty()
                         ? (r.server_watches_error.empty() ? "-" : r.server_watches_error)
                         : s.reason});
  }
  return columns(cells);
}

std::string render_clusters_json(const std::vector<ClusterRow>& rows) {
  std::string out = "{\"clusters\":[";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& s = rows[i].status;
    out += std::string(i ? "," : "") + "{\"id\":" + quoted(s.id) + ",\"local\":" + yes_no(s.local) +
           ",\"state\":" + quoted(mesh::to_string(s.state)) + freshness_json(s.freshness) +
           ",\"reason\":" + quoted(s.reason) + ",\"secret\":" + quoted(s.secret) +
           ",\"generation\":" + std::to_string(s.generation) +
           ",\"process_watches\":" + std::to_string(rows[i].process_watches) +
           ",\"server_watches\":" +
           (rows[i].server_watches < 0 ? "null" : std::to_string(rows[i].server_watches)) + "}";
  }
  return out + "]}\n";
}

std::string render_endpoints_table(const mesh::EndpointSnapshot& snapshot) {
  std::string out = "snapshot " + std::to_string(snapshot.version) + "  service " +
                    snapshot.service.key() + "  port " +
                    (snapshot.port_name.empty() ? "(unnamed)" : snapshot.port_name) + "  subset " +
                    (snapshot.selector.empty() ? "(all)" : snapshot.selector) + "\n";
  std::vector<std::vector<std::string>> cells{
      {"CLUSTER", "ADDRESS", "PORT", "READY", "SERVING", "TERMINATING", "ZONE", "FRESHNESS"}};
  for (const auto& [name, part] : snapshot.clusters) {
    const std::string fresh = freshness_cell(freshness_of(*part));
    if (part->endpoints.empty()) {
      cells.push_back({name, "(empty)", "-", "-", "-", "-", "-", fresh});
      continue;
    }
    for (const auto& e : part->endpoints) {
      cells.push_back({name, e.address, port_of(e, snapshot.port_name), yes_no(e.ready),
                       yes_no(e.serving), yes_no(e.terminating), e.zone.empty() ? "-" : e.zone,
                       fresh});
    }
  }
  if (snapshot.forgotten) {
    cells.push_back(
        {"(forgotten: no cluster has had a slice of this service for the grace period)"});
  } else if (snapshot.clusters.empty()) {
    cells.push_back({"(no cluster has a shard for this service)"});
  }
  return out + columns(cells);
}

std::string render_endpoints_json(const mesh::EndpointSnapshot& snapshot) {
  std::string out = "{\"version\":" + std::to_string(snapshot.version) +
                    ",\"service\":" + quoted(snapshot.service.key()) +
                    ",\"port\":" + quoted(snapshot.port_name) +
                    ",\"subset\":" + quoted(snapshot.selector) + ",\"clusters\":[";
  bool first_cluster = true;
  for (const auto& [name, part] : snapshot.clusters) {
    out += std::string(first_cluster ? "" : ",") + "{\"cluster\":" + quoted(name) +
           freshness_json(freshness_of(*part)) + ",\"endpoints\":[";
    first_cluster = false;
    for (std::size_t i = 0; i < part->endpoints.size(); ++i) {
      const auto& e = part->endpoints[i];
      const mesh::EndpointPort* p = e.port(snapshot.port_name);
      out += std::string(i ? "," : "") + "{\"address\":" + quoted(e.address) +
             ",\"port\":" + (p ? std::to_string(p->port) : "null") +
             ",\"ready\":" + yes_no(e.ready) + ",\"serving\":" + yes_no(e.serving) +
             ",\"terminating\":" + yes_no(e.terminating) + ",\"zone\":" + quoted(e.zone) +
             ",\"node\":" + quoted(e.node_name) + "}";
    }
    out += "]}";
  }
  // "forgotten" only when it is: the output of a service that exists is unchanged.
  return out + "]" + (snapshot.forgotten ? ",\"forgotten\":true" : "") + "}\n";
}

}  // namespace kinformer::tools
