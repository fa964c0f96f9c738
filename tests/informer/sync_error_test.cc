#include "kinformer/informer/sync_error.h"

#include <gtest/gtest.h>

#include <set>

namespace kinformer::informer {
namespace {

client::Error api(int status, std::string reason = "") {
  client::Error e = client::Error::make(client::Errc::api, "m");
  e.http_status = status;
  e.reason = std::move(reason);
  return e;
}

// The reason label is a small fixed set: every status and error code maps into it.
TEST(SyncErrorTest, ReasonsAreBoundedNamesOfWhatWentWrong) {
  EXPECT_EQ(error_reason(api(401, "Unauthorized")), "unauthorized");
  EXPECT_EQ(error_reason(api(403, "Forbidden")), "forbidden");
  EXPECT_EQ(error_reason(api(404, "NotFound")), "not_found");
  EXPECT_EQ(error_reason(api(410, "Gone")), "expired");
  EXPECT_EQ(error_reason(api(429, "TooManyRequests")), "too_many_requests");
  EXPECT_EQ(error_reason(api(500)), "server_error");
  EXPECT_EQ(error_reason(api(503)), "server_error");
  EXPECT_EQ(error_reason(api(422, "Invalid")), "client_error");
  client::Error rv = api(504, "Timeout");
  rv.causes = {"ResourceVersionTooLarge"};
  EXPECT_EQ(error_reason(rv), "resource_version_too_large");
  EXPECT_EQ(error_reason(client::Error::make(client::Errc::auth, "token file x cannot be read")),
            "credentials");
  EXPECT_EQ(error_reason(client::Error::make(client::Errc::network, "refused")), "network");
  EXPECT_EQ(error_reason(client::Error::make(client::Errc::tls, "unknown CA")), "tls");
  EXPECT_EQ(error_reason(client::Error::make(client::Errc::timeout, "deadline")), "timeout");

  std::set<std::string_view> seen;
  for (int status = 0; status < 1000; ++status) seen.insert(error_reason(api(status)));
  for (int code = 0; code <= 9; ++code) {
    seen.insert(error_reason(client::Error::make(static_cast<client::Errc>(code), "m")));
  }
  EXPECT_LE(seen.size(), 17u);
}

}  // namespace
}  // namespace kinformer::informer
