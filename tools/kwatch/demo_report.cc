#include "demo_report.h"

#include <algorithm>
#include <sstream>

namespace kinformer::tools {
namespace {

std::string watches(long n) { return n < 0 ? "?" : std::to_string(n); }

std::string per_resource(const DemoSnapshot& s) {
  std::string out;
  for (const auto& r : s.rows) {
    if (!out.empty()) out += ' ';
    out += r.resource + "=" + watches(r.server_watches);
  }
  return out;
}

std::string pad(std::string s, std::size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

}  // namespace

std::string format_demo_table(const DemoSnapshot& s, std::uint64_t churn_ops,
                              std::uint64_t churn_errors) {
  std::ostringstream out;
  out << "kwatch demo  namespace=" << s.namespace_
      << "  mode=" << (s.unshared ? "unshared" : "shared") << "  t=" << s.elapsed_seconds << "s/"
      << s.duration_seconds << "s  churn ops=" << churn_ops << " errors=" << churn_errors << '\n';
  out << "COMPONENTS " << s.components << "   HANDLERS " << s.handlers << '\n';
  out << pad("RESOURCE", 16) << pad("OBJECTS", 10) << pad("EVENTS", 12) << "SERVER WATCHES" << '\n';
  for (const auto& r : s.rows)
    out << pad(r.resource, 16) << pad(std::to_string(r.objects), 10)
        << pad(std::to_string(r.events), 12) << watches(r.server_watches) << '\n';
  return out.str();
}

std::string format_demo_tick(const DemoSnapshot& s) {
  std::ostringstream out;
  out << "t=" << s.elapsed_seconds << "s components=" << s.components << " handlers=" << s.handlers;
  for (const auto& r : s.rows)
    out << ' ' << r.resource << "(objects=" << r.objects << " events=" << r.events
        << " watches=" << watches(r.server_watches) << ')';
  return out.str();
}

std::string erase_lines(std::size_t lines) {
  if (lines == 0) return {};
  return "\x1b[" + std::to_string(lines) + "F\x1b[J";
}

std::optional<std::string> cache_divergence(const std::string& resource,
                                            const ObjectVersions& server,
                                            const std::vector<ObjectVersions>& caches) {
  const auto bad = std::count_if(caches.begin(), caches.end(),
                                 [&server](const ObjectVersions& c) { return c != server; });
  if (bad == 0) return std::nullopt;
  return resource + " (" + std::to_string(bad) + " caches differ)";
}

std::string list_failed_divergence(const std::string& resource, const std::string& error) {
  return resource + " (list failed: " + error + ")";
}

bool watches_settled(const DemoSnapshot& s) {
  const long expected = s.unshared ? static_cast<long>(s.components) : 1;
  return std::all_of(s.rows.begin(), s.rows.end(),
                     [expected](const DemoRow& r) { return r.server_watches == expected; });
}

DemoVerdict demo_verdict(const DemoSnapshot& s, const std::vector<std::string>& diverged) {
  std::string caches = "caches match the server";
  if (!diverged.empty()) {
    caches = "caches did NOT converge: ";
    for (std::size_t i = 0; i < diverged.size(); ++i) caches += (i ? ", " : "") + diverged[i];
  }
  const long most =
      s.rows.empty()
          ? 0
          : std::max_element(s.rows.begin(), s.rows.end(), [](const DemoRow& a, const DemoRow& b) {
              return a.server_watches < b.server_watches;
            })->server_watches;
  const bool unknown = std::any_of(s.rows.begin(), s.rows.end(),
                                   [](const DemoRow& r) { return r.server_watches < 0; });
  const std::string who = std::to_string(s.components) + " components";
  DemoVerdict v;
  if (s.unshared) {
    v.line = "MULTIPLIED — " + who + " opened " + watches(unknown ? -1 : most) +
             " watches per resource (" + per_resource(s) + "); " + caches;
    v.exit_code = diverged.empty() ? 0 : 1;
  } else if (most > 1) {
    v.line = "FAILED — " + who + ", " + std::to_string(s.handlers) +
             " handlers, more than 1 server watch per resource (" + per_resource(s) + "); " +
             caches;
    v.exit_code = 1;
  } else {
    v.line = (diverged.empty() ? "OK — " : "FAILED — ") + who + ", " + std::to_string(s.handlers) +
             " handlers, 1 server watch per resource (" + per_resource(s) + "); " + caches;
    v.exit_code = diverged.empty() ? 0 : 1;
  }
  if (s.unshared && !diverged.empty()) v.line = "FAILED — " + v.line;
  v.line = "verdict: " + v.line;
  return v;
}

}  // namespace kinformer::tools
