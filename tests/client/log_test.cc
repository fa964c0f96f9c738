// The log sink: logfmt formatting, context fields, and the per-cause rate limit.
#include "kinformer/client/log.h"

#include <gtest/gtest.h>

#include <chrono>

#include "log_capture.h"

namespace kinformer::client {
namespace {

using namespace std::chrono_literals;
using kinformer::testing::LogCapture;

TEST(Log, FormatsLogfmtAndQuotesOnlyWhereNeeded) {
  std::vector<LogField> fields{
      {"informer", "pods ns=default"}, {"rv", "42"}, {"error", "say \"no\"\\x"}, {"empty", ""}};
  LogRecord r{LogLevel::warn, "reflector", "watch failed, rewatching", fields, 0};
  EXPECT_EQ(format_logfmt(r),
            "level=warn component=reflector msg=\"watch failed, rewatching\" informer=\"pods "
            "ns=default\" rv=42 "
            "error=\"say \\\"no\\\"\\\\x\" empty=\"\"");
  std::vector<LogField> hostile{{"error", "proxy said\nlevel=error msg=\"forged\"\r\x01"}};
  r.fields = hostile;
  EXPECT_EQ(format_logfmt(r),
            "level=warn component=reflector msg=\"watch failed, rewatching\" "
            "error=\"proxy said\\nlevel=error msg=\\\"forged\\\"\\r\\x01\"")
      << "a server's text can neither split a line nor forge one";
  r.suppressed = 3;
  r.fields = {};
  EXPECT_EQ(format_logfmt(r),
            "level=warn component=reflector msg=\"watch failed, rewatching\" suppressed=3");
}

TEST(Log, ContextFieldsComeFirstAndWithAddsToThem) {
  LogCapture capture;
  Logger base(capture.sink(), "informer", {{"informer", "pods ns=*"}});
  Logger handler = base.with("informer", {{"handler", "h1"}});
  handler.error("handler threw", {{"error", "boom"}});
  auto records = capture.records();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].component, "informer");
  EXPECT_EQ(records[0].message, "handler threw");
  ASSERT_EQ(records[0].fields.size(), 3u);
  EXPECT_EQ(records[0].fields[0].key, "informer");
  EXPECT_EQ(records[0].fields[1].key, "handler");
  EXPECT_EQ(records[0].field("error"), "boom");
  EXPECT_EQ(records[0].level, LogLevel::error);
}

// A flapping server makes the same line again and again: per cause, `burst` lines, then one per
// `refill`, each saying how many were dropped. Another cause is not held back by it.
TEST(Log, RateLimitedPerCauseWithTheNumberSuppressed) {
  LogCapture capture;
  auto now = std::chrono::steady_clock::time_point{} + 1000h;
  Logger log(capture.sink(), "reflector", {}, LogRateLimit{3, 10s}, [&] { return now; });
  for (int i = 0; i < 10; ++i)
    log.warn("watch failed, rewatching", {{"attempt", std::to_string(i)}});
  log.warn("list failed");
  auto flapping = capture.with_message("watch failed, rewatching");
  ASSERT_EQ(flapping.size(), 3u);
  EXPECT_EQ(flapping[2].field("attempt"), "2");
  EXPECT_EQ(capture.with_message("list failed").size(), 1u) << "another cause has its own bucket";

  now += 10s;  // one token back
  log.warn("watch failed, rewatching", {{"attempt", "10"}});
  log.warn("watch failed, rewatching", {{"attempt", "11"}});
  flapping = capture.with_message("watch failed, rewatching");
  ASSERT_EQ(flapping.size(), 4u);
  EXPECT_EQ(flapping[3].field("attempt"), "10");
  EXPECT_EQ(flapping[3].suppressed, 7u) << "attempts 3..9 were dropped";

  now += 1h;  // the bucket refills to its burst, not beyond
  for (int i = 0; i < 5; ++i) log.warn("watch failed, rewatching");
  flapping = capture.with_message("watch failed, rewatching");
  ASSERT_EQ(flapping.size(), 7u);
  EXPECT_EQ(flapping[4].suppressed, 1u) << "attempt 11";
}

TEST(Log, AZeroRefillTurnsTheLimitOff) {
  LogCapture capture;
  Logger log(capture.sink(), "reflector", {}, LogRateLimit{1, 0ms});
  for (int i = 0; i < 50; ++i) log.info("watch expired, relisting");
  EXPECT_EQ(capture.records().size(), 50u);
}

TEST(Log, CopiesShareTheLimitAndWithStartsAFreshOne) {
  LogCapture capture;
  auto now = std::chrono::steady_clock::time_point{} + 1000h;
  Logger a(capture.sink(), "reflector", {}, LogRateLimit{1, 10s}, [&] { return now; });
  Logger copy = a;
  Logger other = a.with("reflector", {{"informer", "secrets ns=x"}});
  a.warn("list failed");
  copy.warn("list failed");   // the copy shares a's bucket: dropped
  other.warn("list failed");  // another informer's logger: its own bucket
  auto records = capture.with_message("list failed");
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[1].field("informer"), "secrets ns=x");
}

}  // namespace
}  // namespace kinformer::client
