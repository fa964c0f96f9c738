#include "kinformer/client/pager.h"

#include <gtest/gtest.h>

#include <deque>
#include <memory>
#include <string>
#include <vector>

namespace kinformer::client {
namespace {

struct NamedObject : Object {};

ObjectPtr named(std::string name) {
  auto o = std::make_shared<NamedObject>();
  o->metadata.name = std::move(name);
  return o;
}

ObjectList list_page(std::vector<std::string> names, std::string rv, std::string cont) {
  ObjectList l;
  for (auto& n : names) l.items.push_back(named(std::move(n)));
  l.resource_version = std::move(rv);
  l.continue_token = std::move(cont);
  return l;
}

Error expired() {
  Error e = Error::make(Errc::api, "The provided continue parameter is too old");
  e.http_status = 410;
  e.reason = "Expired";
  return e;
}

// Answers pages from a script, in order, and records the options of every call.
struct ScriptedPages {
  std::deque<Result<ObjectList>> script;
  std::vector<ListOptions> calls;
  ListPageFn fn() {
    return [this](const ListOptions& o) {
      calls.push_back(o);
      auto r = std::move(script.front());
      script.pop_front();
      return r;
    };
  }
};

std::vector<std::string> names(const ObjectList& l) {
  std::vector<std::string> out;
  for (const auto& o : l.items) out.push_back(o->metadata.name);
  return out;
}

ListOptions at_zero(std::int64_t limit) {
  ListOptions o;
  o.resource_version = "0";
  o.resource_version_match = "NotOlderThan";
  o.label_selector = "app=x";
  o.limit = limit;
  o.continue_token = "stale";  // the first page never carries one
  return o;
}

TEST(ListPager, FollowsContinueTokensWithoutResourceVersionOnContinuations) {
  ScriptedPages pages;
  pages.script = {list_page({"a", "b"}, "10", "c1"), list_page({"c"}, "11", "c2"),
                  list_page({"d"}, "12", "")};
  auto r = ListPager(pages.fn()).list(at_zero(2));
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(names(*r), (std::vector<std::string>{"a", "b", "c", "d"}));
  EXPECT_EQ(r->resource_version, "12");  // the last page's
  EXPECT_EQ(r->continue_token, "");
  ASSERT_EQ(pages.calls.size(), 3u);
  EXPECT_EQ(pages.calls[0].continue_token, "");
  EXPECT_EQ(pages.calls[0].resource_version, std::optional<std::string>("0"));
  EXPECT_EQ(pages.calls[0].resource_version_match, "NotOlderThan");
  for (std::size_t i = 1; i < 3; ++i) {
    EXPECT_EQ(pages.calls[i].continue_token, "c" + std::to_string(i));
    EXPECT_FALSE(pages.calls[i].resource_version.has_value())
        << "resourceVersion with continue is a 400";
    EXPECT_EQ(pages.calls[i].resource_version_match, "");
  }
  for (const auto& c : pages.calls) {
    EXPECT_EQ(c.limit, 2);
    EXPECT_EQ(c.label_selector, "app=x");
  }
}

TEST(ListPager, AnExpiredContinueTokenRestartsFromScratchOnceThenIsReturned) {
  ScriptedPages pages;
  pages.script = {list_page({"a"}, "10", "c1"), expired(), list_page({"a2"}, "20", "c3"),
                  list_page({"b"}, "21", "")};
  auto r = ListPager(pages.fn()).list(at_zero(1));
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(names(*r), (std::vector<std::string>{"a2", "b"}));  // the first "a" was dropped
  ASSERT_EQ(pages.calls.size(), 4u);
  EXPECT_EQ(pages.calls[2].continue_token, "");
  EXPECT_FALSE(pages.calls[2].resource_version.has_value()) << "the restart is a consistent read";
  EXPECT_EQ(pages.calls[2].resource_version_match, "");

  ScriptedPages twice;
  twice.script = {list_page({"a"}, "10", "c1"), expired(), list_page({"a"}, "20", "c3"), expired()};
  auto again = ListPager(twice.fn()).list(at_zero(1));
  ASSERT_FALSE(again);
  EXPECT_TRUE(again.error().is_expired());
  EXPECT_EQ(twice.calls.size(), 4u);
}

TEST(ListPager, AnExpiryOnTheFirstPageOrWithRestartsOffIsReturned) {
  ScriptedPages first;
  first.script = {expired()};
  auto r = ListPager(first.fn()).list(at_zero(1));
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().is_expired());  // the resourceVersion expired, not a token: the caller's
  EXPECT_EQ(first.calls.size(), 1u);

  ScriptedPages off;
  off.script = {list_page({"a"}, "10", "c1"), expired()};
  auto returned = ListPager(off.fn(), {.restarts_on_expired_continue = 0}).list(at_zero(1));
  ASSERT_FALSE(returned);
  EXPECT_TRUE(returned.error().is_expired());
  EXPECT_EQ(off.calls.size(), 2u);
}

TEST(ListPager, TheRestartHookRestartsTheListWithTheOptionsItGives) {
  ScriptedPages pages;
  pages.script = {Error::make(Errc::too_large, "too big"), list_page({"a"}, "10", "c1"),
                  list_page({"b"}, "10", ""), Error::make(Errc::too_large, "too big"),
                  Error::make(Errc::too_large, "still too big")};
  ListPagerOptions o;
  std::vector<std::string> asked;
  o.restart = [&](const Error& e, const ListOptions& failed) -> std::optional<ListOptions> {
    asked.push_back(e.message);
    if (!failed.resource_version) return std::nullopt;  // already a consistent read: give up
    ListOptions consistent = failed;
    consistent.resource_version.reset();
    consistent.resource_version_match.clear();
    return consistent;
  };
  ListPager pager(pages.fn(), o);
  auto r = pager.list(at_zero(1));
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(names(*r), (std::vector<std::string>{"a", "b"}));
  ASSERT_EQ(pages.calls.size(), 3u);
  EXPECT_FALSE(pages.calls[1].resource_version.has_value());
  EXPECT_EQ(pages.calls[1].continue_token, "");
  EXPECT_EQ(pages.calls[2].continue_token, "c1");

  auto failed = pager.list(at_zero(1));  // the hook restarts once, then gives up
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error().message, "still too big");
  EXPECT_EQ(asked, (std::vector<std::string>{"too big", "too big", "still too big"}));
}

// A server or proxy that answers every page with the continue token it was sent (one that drops
// the continue parameter and returns the first page again) would loop forever, the list
// growing by a page each time.
TEST(ListPager, AContinueTokenThatRepeatsThePreviousOneFails) {
  std::size_t calls = 0;
  ListPager pager([&](const ListOptions&) -> Result<ObjectList> {
    if (++calls > 100) return Error::make(Errc::network, "the test's lister gave up");
    return list_page({"a"}, "10", "same-token");
  });
  auto r = pager.list(at_zero(1));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::decode) << r.error().to_string();
  EXPECT_NE(r.error().message.find("returned the continue token it was asked with"),
            std::string::npos)
      << r.error().message;
  EXPECT_EQ(r.error().message.find("same-token"), std::string::npos) << r.error().message;
  EXPECT_EQ(calls, 2u);  // the first page, then the one that gave the same token back
}

// New tokens without end (a cycle of them, too) stop at max_pages.
TEST(ListPager, PagesAreCappedAtMaxPages) {
  EXPECT_EQ(ListPagerOptions{}.max_pages, 100'000u);
  std::size_t calls = 0;
  ListPagerOptions options;
  options.max_pages = 5;
  ListPager pager(
      [&](const ListOptions&) -> Result<ObjectList> {
        if (++calls > 100) return Error::make(Errc::network, "the test's lister gave up");
        return list_page({"a"}, "10", "token-" + std::to_string(calls % 2));  // t1, t0, t1, ...
      },
      options);
  auto r = pager.list(at_zero(1));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::too_large) << r.error().to_string();
  EXPECT_NE(r.error().message.find("max_pages (5)"), std::string::npos) << r.error().message;
  EXPECT_EQ(calls, 5u);

  // Exactly max_pages pages is a whole list.
  ScriptedPages five;
  five.script = {list_page({"a"}, "1", "c1"), list_page({"b"}, "1", "c2"),
                 list_page({"c"}, "1", "c3"), list_page({"d"}, "1", "c4"),
                 list_page({"e"}, "1", "")};
  auto whole = ListPager(five.fn(), options).list(at_zero(1));
  ASSERT_TRUE(whole) << whole.error().to_string();
  EXPECT_EQ(whole->items.size(), 5u);
}

}  // namespace
}  // namespace kinformer::client
