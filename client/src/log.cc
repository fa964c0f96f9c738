#include "kinformer/client/log.h"

#include <algorithm>
#include <cstdio>

namespace kinformer::client {
namespace {

bool needs_quotes(std::string_view v) {
  if (v.empty()) return true;
  return std::any_of(v.begin(), v.end(), [](char c) {
    return c == ' ' || c == '"' || c == '=' || c == '\\' || static_cast<unsigned char>(c) < 0x20 ||
           c == 0x7f;
  });
}

void append_value(std::string& out, std::string_view v, bool always_quote = false) {
  if (!always_quote && !needs_quotes(v)) {
    out += v;
    return;
  }
  out += '"';
  for (char c : v) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      // Other control characters: an error body from a proxy must not forge or split a line.
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[(static_cast<unsigned char>(c) >> 4) & 0xf];
      out += kHex[static_cast<unsigned char>(c) & 0xf];
    } else {
      out += c;
    }
  }
  out += '"';
}

}  // namespace

std::string_view to_string(LogLevel level) noexcept {
  switch (level) {
    case LogLevel::debug:
      return "debug";
    case LogLevel::info:
      return "info";
    case LogLevel::warn:
      return "warn";
    case LogLevel::error:
      return "error";
  }
  return "unknown";
}

std::string format_logfmt(const LogRecord& record) {
  std::string out = "level=";
  out += to_string(record.level);
  out += " component=";
  append_value(out, record.component);
  out += " msg=";
  append_value(out, record.message, /*always_quote=*/true);
  for (const LogField& f : record.fields) {
    out += ' ';
    out += f.key;
    out += '=';
    append_value(out, f.value);
  }
  if (record.suppressed > 0) out += " suppressed=" + std::to_string(record.suppressed);
  return out;
}

LogSink stderr_log_sink() {
  return [](const LogRecord& record) {
    std::string line = format_logfmt(record);
    line += '\n';
    std::fwrite(line.data(), 1, line.size(), stderr);  // one write: lines of threads do not mix
  };
}

struct Logger::Limits {
  struct Bucket {
    double tokens;
    std::chrono::steady_clock::time_point last;
    std::uint64_t suppressed = 0;
  };
  std::mutex mu;
  // Keyed by message: constant texts, so the map stays as small as the set of causes.
  std::unordered_map<std::string, Bucket> buckets;  // guarded by mu
};

Logger::Logger(LogSink sink, std::string component, std::vector<LogField> context,
               LogRateLimit limit, Now now)
    : sink_(sink ? std::move(sink) : stderr_log_sink()),
      component_(std::move(component)),
      context_(std::move(context)),
      limit_{std::max(1.0, limit.burst), limit.refill},
      now_(now ? std::move(now) : Now([] { return std::chrono::steady_clock::now(); })),
      limits_(std::make_shared<Limits>()) {}

Logger Logger::with(std::string component, std::vector<LogField> more_context) const {
  std::vector<LogField> context = context_;
  for (auto& f : more_context) context.push_back(std::move(f));
  return Logger(sink_, std::move(component), std::move(context), limit_, now_);
}

void Logger::log(LogLevel level, std::string_view message,
                 std::initializer_list<LogField> fields) const {
  std::uint64_t suppressed = 0;
  if (limit_.refill.count() > 0) {
    auto now = now_();
    std::lock_guard lock(limits_->mu);
    auto [it, fresh] =
        limits_->buckets.try_emplace(std::string(message), Limits::Bucket{limit_.burst, now});
    Limits::Bucket& b = it->second;
    if (!fresh) {
      double earned = std::chrono::duration<double>(now - b.last) / limit_.refill;
      b.tokens = std::min(limit_.burst, b.tokens + earned);
      b.last = now;
    }
    if (b.tokens < 1.0) {
      ++b.suppressed;
      return;
    }
    b.tokens -= 1.0;
    suppressed = std::exchange(b.suppressed, 0);
  }
  std::vector<LogField> all;
  all.reserve(context_.size() + fields.size());
  all.insert(all.end(), context_.begin(), context_.end());
  all.insert(all.end(), fields.begin(), fields.end());
  LogRecord record{level, component_, message, all, suppressed};
  try {
    sink_(record);
  } catch (...) {
    // A sink must not throw (it runs inside kinformer's error paths); if one does, the record
    // is lost rather than the thread.
  }
}

}  // namespace kinformer::client
