#include "cache_dump.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "cli.h"
#include "kinformer/client/dynamic_object.h"

namespace kinformer::tools {
namespace {

constexpr const char* kRedacted = "<redacted>";

std::string write(const rapidjson::Value& v) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  v.Accept(w);
  return std::string(buf.GetString(), buf.GetSize());
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    std::size_t pos = s.find(sep, start);
    out.push_back(s.substr(start, pos - start));
    if (pos == std::string::npos) return out;
    start = pos + 1;
  }
}

// v1, v1beta1, v2alpha3.
bool looks_like_version(const std::string& s) {
  if (s.size() < 2 || s[0] != 'v' || s[1] < '1' || s[1] > '9') return false;
  std::size_t i = 1;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
  if (i == s.size()) return true;
  for (const std::string level : {"alpha", "beta"}) {
    if (s.compare(i, level.size(), level) == 0) {
      std::size_t j = i + level.size();
      if (j == s.size()) return false;
      while (j < s.size() && s[j] >= '0' && s[j] <= '9') ++j;
      return j == s.size();
    }
  }
  return false;
}

bool valid_segment(const std::string& s) {
  if (s.empty()) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
  });
}

std::string metadata_only(const client::Object& o) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  auto str = [&](const std::string& s) {
    w.String(s.c_str(), static_cast<rapidjson::SizeType>(s.size()));
  };
  w.StartObject();
  w.Key("metadata");
  w.StartObject();
  if (!o.metadata.namespace_.empty()) {
    w.Key("namespace");
    str(o.metadata.namespace_);
  }
  w.Key("name");
  str(o.metadata.name);
  w.Key("uid");
  str(o.metadata.uid.str());
  w.Key("resourceVersion");
  str(o.metadata.resource_version);
  w.EndObject();
  w.EndObject();
  return std::string(buf.GetString(), buf.GetSize());
}

}  // namespace

ResolvedResource resolve_resource(const std::string& name) {
  static const std::map<std::string, client::GroupVersionResource> aliases = [] {
    const client::GroupVersionResource pods{"", "v1", "pods", "Pod", true};
    const client::GroupVersionResource secrets{"", "v1", "secrets", "Secret", true};
    const client::GroupVersionResource endpoints{"", "v1", "endpoints", "Endpoints", true};
    const client::GroupVersionResource slices{"discovery.k8s.io", "v1", "endpointslices",
                                              "EndpointSlice", true};
    return std::map<std::string, client::GroupVersionResource>{
        {"pods", pods},
        {"pod", pods},
        {"po", pods},
        {"secrets", secrets},
        {"secret", secrets},
        {"endpoints", endpoints},
        {"ep", endpoints},
        {"endpointslices", slices},
        {"endpointslice", slices},
    };
  }();
  if (auto it = aliases.find(name); it != aliases.end()) return {it->second, false};
  if (name.find('/') != std::string::npos) {
    auto parts = split(name, '/');
    if (parts.size() == 2) parts.insert(parts.begin(), "");  // v1/configmaps: core group
    if (parts.size() == 3 && (parts[0].empty() || valid_segment(parts[0])) &&
        looks_like_version(parts[1]) && valid_segment(parts[2])) {
      if (parts[0] == "core") parts[0].clear();
      return {{parts[0], parts[1], parts[2], "", true}, true};
    }
  }
  throw UsageError(
      "unknown resource '" + name +
      "' (expected pods, secrets, endpoints, endpointslices or group/version/resource, "
      "e.g. v1/configmaps or apps/v1/deployments)");
}

bool apply_discovery(std::string_view json, client::GroupVersionResource& gvr) {
  rapidjson::Document doc;
  doc.Parse(json.data(), json.size());
  if (doc.HasParseError() || !doc.IsObject()) return false;
  auto resources = doc.FindMember("resources");
  if (resources == doc.MemberEnd() || !resources->value.IsArray()) return false;
  for (const auto& r : resources->value.GetArray()) {
    if (!r.IsObject()) continue;
    auto n = r.FindMember("name");
    if (n == r.MemberEnd() || !n->value.IsString() || gvr.resource != n->value.GetString())
      continue;
    if (auto k = r.FindMember("kind"); k != r.MemberEnd() && k->value.IsString())
      gvr.kind = k->value.GetString();
    if (auto ns = r.FindMember("namespaced"); ns != r.MemberEnd() && ns->value.IsBool())
      gvr.namespaced = ns->value.GetBool();
    return true;
  }
  return false;
}

bool is_secret_resource(const client::GroupVersionResource& gvr) {
  return gvr.group.empty() && gvr.resource == "secrets";
}

std::string redact_secret_json(std::string_view json) {
  rapidjson::Document doc;
  doc.Parse(json.data(), json.size());
  if (doc.HasParseError() || !doc.IsObject())
    return R"x({"error":"unparsable object (redacted)"})x";
  for (const char* field : {"data", "stringData"}) {
    auto m = doc.FindMember(field);
    if (m == doc.MemberEnd()) continue;
    if (m->value.IsObject()) {
      for (auto& kv : m->value.GetObject()) kv.value.SetString(rapidjson::StringRef(kRedacted));
    } else if (!m->value.IsNull()) {
      m->value.SetString(rapidjson::StringRef(kRedacted));
    }
  }
  // kubectl.kubernetes.io/last-applied-configuration holds a copy of the data.
  if (auto meta = doc.FindMember("metadata"); meta != doc.MemberEnd() && meta->value.IsObject()) {
    if (auto ann = meta->value.FindMember("annotations");
        ann != meta->value.MemberEnd() && ann->value.IsObject()) {
      auto last = ann->value.FindMember("kubectl.kubernetes.io/last-applied-configuration");
      if (last != ann->value.MemberEnd()) last->value.SetString(rapidjson::StringRef(kRedacted));
    }
  }
  return write(doc);
}

std::string dump_line(const client::Object& object, const DumpOptions& options) {
  const auto* dyn = dynamic_cast<const client::DynamicObject*>(&object);
  if (dyn == nullptr) return metadata_only(object);
  rapidjson::Document doc;
  doc.Parse(dyn->json.data(), dyn->json.size());
  if (doc.HasParseError() || !doc.IsObject()) return metadata_only(object);
  bool secret = options.secret_resource;
  if (auto kind = doc.FindMember("kind"); kind != doc.MemberEnd() && kind->value.IsString() &&
                                          std::string_view(kind->value.GetString()) == "Secret")
    secret = true;
  if (secret && !options.show_secret_data) return redact_secret_json(dyn->json);
  return write(doc);
}

std::string format_dump(std::vector<client::ObjectPtr> objects, const DumpOptions& options) {
  std::sort(objects.begin(), objects.end(),
            [](const client::ObjectPtr& a, const client::ObjectPtr& b) {
              if (a->metadata.namespace_ != b->metadata.namespace_)
                return a->metadata.namespace_ < b->metadata.namespace_;
              return a->metadata.name < b->metadata.name;
            });
  std::string out;
  for (const auto& o : objects) {
    out += dump_line(*o, options);
    out += '\n';
  }
  return out;
}

bool write_dump_file(const std::string& path, const std::string& text) {
  struct stat st {};
  const bool exists = ::lstat(path.c_str(), &st) == 0;
  if (exists && !S_ISREG(st.st_mode)) {
    std::ofstream out(path, std::ios::binary | std::ios::out);
    out << text;
    out.flush();
    return static_cast<bool>(out);
  }
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      return false;
    }
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

std::string format_event(std::string_view type, const client::Object& object,
                         bool final_state_unknown) {
  std::string line(type);
  line += ' ';
  line += object.key();
  line += " rv=";
  line += object.metadata.resource_version;
  if (final_state_unknown) line += " final-state-unknown";
  return line;
}

std::optional<std::string> dump_target(const std::optional<std::string>& dump, bool events) {
  if (dump) return dump;
  if (events) return std::nullopt;
  return "-";
}

bool permanent_sync_error(const client::Error& e) {
  return e.code == client::Errc::api &&
         (e.http_status == 401 || e.http_status == 403 || e.http_status == 404);
}

SyncState sync_state(bool has_synced, const std::optional<client::Error>& last_error,
                     bool past_deadline) {
  if (has_synced) return SyncState::synced;
  if (last_error && permanent_sync_error(*last_error)) return SyncState::failed;
  if (past_deadline) return SyncState::timed_out;
  return SyncState::syncing;
}

FreshnessChange freshness_change(const informer::Freshness& f, bool& reported_stale) {
  using State = informer::Freshness::State;
  if (!reported_stale && f.state == State::stale) {
    reported_stale = true;
    return FreshnessChange::stale;
  }
  if (reported_stale && f.state == State::fresh) {
    reported_stale = false;
    return FreshnessChange::fresh_again;
  }
  return FreshnessChange::none;
}

std::string format_seconds(std::chrono::milliseconds elapsed) {
  std::ostringstream s;
  s.precision(1);
  s << std::fixed << static_cast<double>(elapsed.count()) / 1000.0 << "s";
  return s.str();
}

std::string format_sync_progress(const std::string& resource, const std::string& where,
                                 std::chrono::milliseconds elapsed,
                                 const std::optional<client::Error>& last_error) {
  std::string line = "\r\x1b[Ksyncing " + resource + " (" + where + ") " + format_seconds(elapsed);
  if (last_error) line += " retrying after: " + last_error->to_string().substr(0, 100);
  return line;
}

}  // namespace kinformer::tools
