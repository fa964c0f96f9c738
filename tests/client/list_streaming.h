#pragma once
// Test support for the streaming list decoders (JsonListDecoder, ProtobufListDecoder): feed a
// body in pieces cut at given offsets, and compare two decoded lists (or their errors).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "kinformer/client/pod.h"
#include "kinformer/client/watch.h"
#include "protobuf_samples.h"

namespace kinformer::testing {

/// Feeds `body` to `decoder` in pieces cut at `cuts` (offsets, ascending), then finishes.
template <typename Decoder>
client::Result<client::ObjectList> feed_in_pieces(Decoder& decoder, std::string_view body,
                                                  const std::vector<std::size_t>& cuts) {
  std::size_t from = 0;
  for (std::size_t cut : cuts) {
    if (auto s = decoder.feed(body.substr(from, cut - from)); !s) return std::move(s).error();
    from = cut;
  }
  if (auto s = decoder.feed(body.substr(from)); !s) return std::move(s).error();
  return decoder.finish();
}

/// Feeds `body` in pieces of `piece` bytes; returns the decoder's largest buffer capacity seen
/// once its first item was decoded; a failed feed is reported and ends the feeding.
template <typename Decoder>
std::size_t largest_buffer_after_first_item(Decoder& decoder, std::string_view body,
                                            std::size_t piece = 1000) {
  std::size_t largest = 0;
  for (std::size_t at = 0; at < body.size(); at += piece) {
    auto s = decoder.feed(body.substr(at, piece));
    EXPECT_TRUE(s) << "feed at byte " << at;
    if (!s) return 0;
    if (decoder.items() >= 1) largest = std::max(largest, decoder.buffer_capacity());
  }
  return largest;
}

/// Two lists of Pods (or two errors) are the same: the same error code and message, or the
/// same resourceVersion, continue token and items field by field.
inline void expect_same_list(const client::Result<client::ObjectList>& got,
                             const client::Result<client::ObjectList>& want,
                             const std::string& where) {
  ASSERT_EQ(got.ok(), want.ok()) << where << ": "
                                 << (got ? want.error().to_string() : got.error().to_string());
  if (!want) {
    EXPECT_EQ(got.error().code, want.error().code) << where;
    EXPECT_EQ(got.error().message, want.error().message) << where;
    return;
  }
  EXPECT_EQ(got->resource_version, want->resource_version) << where;
  EXPECT_EQ(got->continue_token, want->continue_token) << where;
  ASSERT_EQ(got->items.size(), want->items.size()) << where;
  for (std::size_t i = 0; i < got->items.size(); ++i) {
    expect_same(dynamic_cast<const client::Pod&>(*got->items[i]),
                dynamic_cast<const client::Pod&>(*want->items[i]));
  }
}

}  // namespace kinformer::testing
