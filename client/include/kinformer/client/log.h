#pragma once
// Logging: every kinformer log line goes through a LogSink that the embedding component passes
// in (FactoryOptions::log, RestClientOptions::log); the default writes logfmt lines to stderr.

#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kinformer::client {

enum class LogLevel { debug, info, warn, error };
[[nodiscard]] std::string_view to_string(LogLevel level) noexcept;

/// One key=value pair of a record. kinformer never puts a token, a key or Secret data in one.
struct LogField {
  std::string key;
  std::string value;
};

/// One log record. Its views are valid only during the sink call.
struct LogRecord {
  LogLevel level = LogLevel::info;
  std::string_view component;  ///< "reflector", "informer", "executor", "client"
  std::string_view message;    ///< constant text naming the cause; variables go in fields
  /// The logger's context first (informer="pods ns=default", handler=...), then the call's.
  std::span<const LogField> fields;
  /// Records of this cause the rate limit dropped since the previous one of it was written.
  std::uint64_t suppressed = 0;
};

/// Receives every record. Called from any kinformer thread, concurrently: it must be thread-safe,
/// should return quickly (it runs on the reflector's and the handlers' threads) and must not
/// throw (an exception is swallowed and the record lost). kinformer never calls it with a lock
/// of its own held.
using LogSink = std::function<void(const LogRecord&)>;

/// `level=warn component=reflector msg="..." key=value ... [suppressed=N]` (values quoted when
/// they hold a space, a quote, '=' or nothing; quotes and backslashes escaped).
[[nodiscard]] std::string format_logfmt(const LogRecord& record);
/// The default sink: format_logfmt lines on stderr, one write per line.
[[nodiscard]] LogSink stderr_log_sink();

/// Per cause (a message text), a token bucket: `burst` records at once, then one per `refill`.
/// A zero `refill` turns the limit off; a burst below 1 counts as 1.
struct LogRateLimit {
  double burst = 5;
  std::chrono::milliseconds refill{10'000};
};

/// A component's handle on a sink: adds its fixed context fields to every record and
/// rate-limits per cause, so a flapping server cannot flood a log; the next record written for
/// a cause carries the number dropped. Copies share the rate-limit state.
///
/// Thread-safe: no concurrent call causes a data race. The sink must outlive nothing: it is
/// held by value (a std::function), and so is the context.
class Logger {
 public:
  using Now = std::function<std::chrono::steady_clock::time_point()>;

  /// A null `sink` is stderr_log_sink(). `now` (tests) defaults to steady_clock::now.
  explicit Logger(LogSink sink = {}, std::string component = "kinformer",
                  std::vector<LogField> context = {}, LogRateLimit limit = {}, Now now = {});

  /// A logger for another component or with more context, sharing the sink (not the limits).
  [[nodiscard]] Logger with(std::string component, std::vector<LogField> more_context = {}) const;

  void log(LogLevel level, std::string_view message,
           std::initializer_list<LogField> fields = {}) const;
  void debug(std::string_view message, std::initializer_list<LogField> fields = {}) const {
    log(LogLevel::debug, message, fields);
  }
  void info(std::string_view message, std::initializer_list<LogField> fields = {}) const {
    log(LogLevel::info, message, fields);
  }
  void warn(std::string_view message, std::initializer_list<LogField> fields = {}) const {
    log(LogLevel::warn, message, fields);
  }
  void error(std::string_view message, std::initializer_list<LogField> fields = {}) const {
    log(LogLevel::error, message, fields);
  }

  [[nodiscard]] const LogSink& sink() const noexcept { return sink_; }

 private:
  struct Limits;

  LogSink sink_;
  std::string component_;
  std::vector<LogField> context_;
  LogRateLimit limit_;
  Now now_;
  std::shared_ptr<Limits> limits_;
};

}  // namespace kinformer::client
