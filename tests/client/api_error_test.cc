#include "kinformer/client/api_error.h"

#include <gtest/gtest.h>

namespace kinformer::client {
namespace {

TEST(ApiError, StatusJson403KeepsServerMessage) {
  Error e = error_from_response(
      403,
      R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"secrets is forbidden: User \"system:serviceaccount:x:y\" cannot list resource \"secrets\"","reason":"Forbidden","details":{"kind":"secrets"},"code":403})");
  EXPECT_EQ(e.code, Errc::api);
  EXPECT_EQ(e.http_status, 403);
  EXPECT_EQ(e.reason, "Forbidden");
  EXPECT_NE(e.message.find("cannot list resource"), std::string::npos);
  EXPECT_EQ(e.to_string().rfind("api 403 Forbidden: secrets is forbidden", 0), 0u);
}

TEST(ApiError, Unauthorized401) {
  Error e = error_from_response(
      401,
      R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401})");
  EXPECT_EQ(e.http_status, 401);
  EXPECT_EQ(e.message, "Unauthorized");
}

// A JSON body that is not a Status (a proxy passing an API object on with an error status) may
// hold Secret data: the error keeps its size, never its text, since errors reach logs.
TEST(ApiError, JsonBodyThatIsNotAStatusKeepsOnlyItsSize) {
  const std::string body =
      R"({"kind":"SecretList","items":[{"data":{"password":"aHVudGVyMg=="}}]})";
  Error e = error_from_response(500, body);
  EXPECT_EQ(e.http_status, 500);
  EXPECT_EQ(e.message.find("aHVudGVyMg=="), std::string::npos) << e.message;
  EXPECT_NE(e.message.find(std::to_string(body.size()) + " bytes"), std::string::npos) << e.message;
  EXPECT_EQ(error_from_response(502, "[1,2,3]").message.find("1,2"), std::string::npos);
  EXPECT_EQ(error_from_response(500, "\xEF\xBB\xBF" + body).message.find("aHVudGVyMg=="),
            std::string::npos)
      << "a byte-order mark does not hide the JSON";
  EXPECT_EQ(error_from_response(500, "\f" + body).message.find("aHVudGVyMg=="), std::string::npos);
}

TEST(ApiError, PlainText429WithRetryAfter) {
  Error e = error_from_response(429, "Too many requests, please try again later.\n", "7");
  EXPECT_TRUE(e.is_too_many_requests());
  EXPECT_EQ(e.reason, "TooManyRequests");
  EXPECT_EQ(e.message, "Too many requests, please try again later.");
  EXPECT_EQ(e.retry_after, std::chrono::seconds(7));
}

TEST(ApiError, GoneContinueExpired410) {
  Error e = error_from_response(
      410,
      R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"The provided continue parameter is too old to display a consistent list result.","reason":"Expired","code":410})");
  EXPECT_TRUE(e.is_expired());
  EXPECT_EQ(e.reason, "Expired");
}

TEST(ApiError, TooLargeResourceVersion504) {
  Error e = error_from_response(
      504,
      R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Too large resource version: 10, current: 5","reason":"Timeout","details":{"retryAfterSeconds":1},"code":504})");
  EXPECT_TRUE(e.is_resource_version_too_large());
  EXPECT_EQ(e.retry_after, std::chrono::seconds(1));
}

TEST(ApiError, TooLargeResourceVersionIsToldByTheStatusCause) {
  Error e = error_from_response(
      504,
      R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Timeout: Too large resource version: 20, current: 10","reason":"Timeout","details":{"causes":[{"reason":"ResourceVersionTooLarge","message":"Too large resource version"}],"retryAfterSeconds":1},"code":504})");
  EXPECT_EQ(e.causes, (std::vector<std::string>{"ResourceVersionTooLarge"}));
  EXPECT_TRUE(e.has_cause("ResourceVersionTooLarge"));
  EXPECT_TRUE(e.is_resource_version_too_large());
  // A plain timeout also carries reason Timeout and a retry-after: it is not a too-large RV.
  Error timeout = error_from_response(
      504,
      R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Timeout: request did not complete within the allotted timeout","reason":"Timeout","details":{"retryAfterSeconds":1},"code":504})");
  EXPECT_TRUE(timeout.causes.empty());
  EXPECT_FALSE(timeout.is_resource_version_too_large());
}

TEST(ApiError, RetryAfterIsClampedToFiveMinutes) {
  EXPECT_EQ(error_from_response(429, "slow down", "86400").retry_after, kMaxRetryAfter);
  EXPECT_EQ(error_from_response(429, "slow down", "99999999999999999999999").retry_after,
            kMaxRetryAfter)
      << "too many digits for a long long is still a very long wait, not garbage";
  EXPECT_EQ(error_from_response(
                503, R"({"kind":"Status","details":{"retryAfterSeconds":9000000000},"code":503})")
                .retry_after,
            kMaxRetryAfter);
  EXPECT_EQ(error_from_response(429, "slow down", "32").retry_after, std::chrono::seconds(32));
  EXPECT_FALSE(error_from_response(429, "slow down", "-5").retry_after);
}

TEST(ApiError, HeaderWinsAndGarbageIsTolerated) {
  Error e = error_from_response(
      503, R"({"kind":"Status","details":{"retryAfterSeconds":3},"code":503})", "5");
  EXPECT_EQ(e.retry_after, std::chrono::seconds(5));
  Error g = error_from_response(500, "{not json", "soon");
  EXPECT_EQ(g.message, "HTTP 500 with a JSON body that is not a Status (9 bytes)");
  EXPECT_FALSE(g.retry_after);
  Error empty = error_from_response(502, "");
  EXPECT_EQ(empty.message, "HTTP 502");
  std::string huge(5000, 'x');
  EXPECT_EQ(error_from_response(500, huge).message.size(), 1024u);
}

}  // namespace
}  // namespace kinformer::client
