#pragma once
// LogCapture: a LogSink for tests that keeps a copy of every record (thread-safe), so a test can
// assert the fields kinformer logs, and that no secret ever reaches a log.

#include <algorithm>
#include <mutex>
#include <string>
#include <vector>

#include "kinformer/client/log.h"

namespace kinformer::testing {

class LogCapture {
 public:
  struct Record {
    client::LogLevel level;
    std::string component;
    std::string message;
    std::vector<client::LogField> fields;
    std::uint64_t suppressed;

    [[nodiscard]] std::string field(const std::string& key) const {
      for (const auto& f : fields) {
        if (f.key == key) return f.value;
      }
      return "<absent>";
    }
    [[nodiscard]] std::string line() const {
      client::LogRecord r{level, component, message, fields, suppressed};
      return client::format_logfmt(r);
    }
  };

  /// The sink; the capture must outlive every logger that got it.
  client::LogSink sink() {
    return [this](const client::LogRecord& r) {
      Record copy{r.level,
                  std::string(r.component),
                  std::string(r.message),
                  {r.fields.begin(), r.fields.end()},
                  r.suppressed};
      std::lock_guard lock(mu_);
      records_.push_back(std::move(copy));
    };
  }

  std::vector<Record> records() const {
    std::lock_guard lock(mu_);
    return records_;
  }
  std::vector<Record> with_message(const std::string& message) const {
    std::vector<Record> out;
    for (auto& r : records()) {
      if (r.message == message) out.push_back(r);
    }
    return out;
  }
  /// Every record as one logfmt text, for "never contains" checks.
  std::string text() const {
    std::string out;
    for (const auto& r : records()) out += r.line() + "\n";
    return out;
  }

 private:
  mutable std::mutex mu_;
  std::vector<Record> records_;  // guarded by mu_
};

}  // namespace kinformer::testing
