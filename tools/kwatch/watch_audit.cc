#include "watch_audit.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <stdexcept>

namespace kinformer::tools {
namespace {

bool is_name_char(char c, bool first) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
         (!first && c >= '0' && c <= '9');
}

[[noreturn]] void fail(std::size_t line_no, const std::string& what) {
  throw std::runtime_error("metrics line " + std::to_string(line_no) + ": " + what);
}

// Parses `name{label="value",...} value [timestamp]`.
Sample parse_line(std::string_view line, std::size_t line_no) {
  Sample s;
  std::size_t i = 0;
  while (i < line.size() && is_name_char(line[i], i == 0)) ++i;
  if (i == 0) fail(line_no, "expected a metric name");
  s.name = std::string(line.substr(0, i));
  if (i < line.size() && line[i] == '{') {
    ++i;
    while (true) {
      while (i < line.size() && (line[i] == ' ' || line[i] == ',')) ++i;
      if (i < line.size() && line[i] == '}') {
        ++i;
        break;
      }
      std::size_t start = i;
      while (i < line.size() && is_name_char(line[i], i == start)) ++i;
      if (i == start || i + 1 >= line.size() || line[i] != '=' || line[i + 1] != '"')
        fail(line_no, "malformed label in " + s.name);
      std::string key(line.substr(start, i - start));
      i += 2;
      std::string value;
      for (;; ++i) {
        if (i >= line.size()) fail(line_no, "unterminated label value in " + s.name);
        char c = line[i];
        if (c == '"') {
          ++i;
          break;
        }
        if (c == '\\' && i + 1 < line.size()) {
          char n = line[++i];
          value += n == 'n' ? '\n' : n;
        } else {
          value += c;
        }
      }
      s.labels.emplace(std::move(key), std::move(value));
    }
  }
  while (i < line.size() && line[i] == ' ') ++i;
  std::size_t end = line.find(' ', i);
  std::string_view number = line.substr(i, end == std::string_view::npos ? end : end - i);
  if (number == "+Inf") {
    s.value = INFINITY;
  } else if (number == "-Inf") {
    s.value = -INFINITY;
  } else if (number == "NaN") {
    s.value = NAN;
  } else {
    auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), s.value);
    if (ec != std::errc() || ptr != number.data() + number.size() || number.empty())
      fail(line_no, "bad sample value '" + std::string(number) + "' for " + s.name);
  }
  return s;
}

std::string label(const Sample& s, const char* key) {
  auto it = s.labels.find(key);
  return it == s.labels.end() ? std::string() : it->second;
}

}  // namespace

std::vector<Sample> parse_prometheus_text(std::string_view text) {
  std::vector<Sample> samples;
  std::size_t line_no = 0;
  while (!text.empty()) {
    ++line_no;
    std::size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    std::size_t first = line.find_first_not_of(' ');
    if (first == std::string_view::npos || line[first] == '#') continue;
    samples.push_back(parse_line(line.substr(first), line_no));
  }
  return samples;
}

std::string WatchCount::name() const {
  return group.empty() ? resource : group + "/" + version + "/" + resource;
}

long WatchAudit::total() const {
  long sum = 0;
  for (const auto& c : counts) sum += c.count;
  return sum;
}

long WatchAudit::count(std::string_view name) const {
  for (const auto& c : counts)
    if (c.name() == name) return c.count;
  return 0;
}

WatchAudit audit_watches(std::string_view metrics_text) {
  const auto samples = parse_prometheus_text(metrics_text);
  WatchAudit audit;
  const bool has_longrunning = std::any_of(samples.begin(), samples.end(), [](const Sample& s) {
    return s.name == "apiserver_longrunning_requests";
  });
  const bool has_registered = std::any_of(samples.begin(), samples.end(), [](const Sample& s) {
    return s.name == "apiserver_registered_watchers";
  });
  if (has_longrunning) {
    audit.source = "apiserver_longrunning_requests";
  } else if (has_registered) {
    audit.source = "apiserver_registered_watchers";
  } else {
    return audit;
  }
  std::map<std::string, WatchCount> by_name;
  for (const auto& s : samples) {
    if (s.name != audit.source) continue;
    if (has_longrunning && label(s, "verb") != "WATCH") continue;
    WatchCount c{label(s, "group"), label(s, "version"),
                 has_longrunning ? label(s, "resource") : label(s, "kind"), 0};
    if (has_longrunning && !label(s, "subresource").empty())
      c.resource += "/" + label(s, "subresource");
    auto [it, inserted] = by_name.try_emplace(c.name(), c);
    it->second.count += std::lround(s.value);
  }
  for (auto& [name, c] : by_name) audit.counts.push_back(std::move(c));
  std::sort(audit.counts.begin(), audit.counts.end(), [](const WatchCount& a, const WatchCount& b) {
    return a.count != b.count ? a.count > b.count : a.name() < b.name();
  });
  return audit;
}

}  // namespace kinformer::tools
