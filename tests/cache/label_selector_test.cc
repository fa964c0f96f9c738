#include "kinformer/cache/label_selector.h"

#include <gtest/gtest.h>

#include "kinformer/client/error.h"

namespace kinformer::cache {
namespace {

const client::StringMap kLabels = {{"app", "web"}, {"env", "prod"}, {"tier", "front"}};

TEST(LabelSelectorTest, EmptyMatchesEverything) {
  EXPECT_TRUE(LabelSelector::parse("").matches(kLabels));
  EXPECT_TRUE(LabelSelector::parse("  ").matches({}));
  EXPECT_TRUE(LabelSelector::parse("").empty());
}

TEST(LabelSelectorTest, Equality) {
  EXPECT_TRUE(LabelSelector::parse("app=web").matches(kLabels));
  EXPECT_TRUE(LabelSelector::parse("app==web").matches(kLabels));
  EXPECT_FALSE(LabelSelector::parse("app=db").matches(kLabels));
  EXPECT_TRUE(LabelSelector::parse("app!=db").matches(kLabels));
  EXPECT_FALSE(LabelSelector::parse("app!=web").matches(kLabels));
  EXPECT_TRUE(LabelSelector::parse("missing!=x").matches(kLabels));
  EXPECT_TRUE(LabelSelector::parse("app=web, env=prod").matches(kLabels));
  EXPECT_FALSE(LabelSelector::parse("app=web,env=dev").matches(kLabels));
}

TEST(LabelSelectorTest, SetBased) {
  EXPECT_TRUE(LabelSelector::parse("env in (prod, staging)").matches(kLabels));
  EXPECT_FALSE(LabelSelector::parse("env in (dev)").matches(kLabels));
  EXPECT_FALSE(LabelSelector::parse("missing in (a)").matches(kLabels));
  EXPECT_TRUE(LabelSelector::parse("env notin (dev,qa)").matches(kLabels));
  EXPECT_FALSE(LabelSelector::parse("env notin (prod)").matches(kLabels));
  EXPECT_TRUE(LabelSelector::parse("missing notin (a)").matches(kLabels));
  EXPECT_TRUE(LabelSelector::parse("app").matches(kLabels));
  EXPECT_FALSE(LabelSelector::parse("missing").matches(kLabels));
  EXPECT_TRUE(LabelSelector::parse("!missing").matches(kLabels));
  EXPECT_FALSE(LabelSelector::parse("!app").matches(kLabels));
  EXPECT_TRUE(LabelSelector::parse("app,!missing,env in (prod),tier!=back").matches(kLabels));
  EXPECT_TRUE(LabelSelector::parse("example.com/key=v").matches({{"example.com/key", "v"}}));
}

TEST(LabelSelectorTest, CanonicalText) {
  EXPECT_EQ(LabelSelector::parse("b in (y, x), a").to_string(), "a,b in (x,y)");
}

TEST(LabelSelectorTest, ErrorsThrowConfigError) {
  EXPECT_THROW(LabelSelector::parse("app in (a"), client::ConfigError);
  EXPECT_THROW(LabelSelector::parse("app in ()"), client::ConfigError);
  EXPECT_THROW(LabelSelector::parse("=x"), client::ConfigError);
  EXPECT_THROW(LabelSelector::parse("a=b,"), client::ConfigError);
  EXPECT_THROW(LabelSelector::parse("a ! b"), client::ConfigError);
  EXPECT_THROW(LabelSelector::parse("a b"), client::ConfigError);
  try {
    LabelSelector::parse("a in (x");
    FAIL();
  } catch (const client::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("position"), std::string::npos);
  }
}

}  // namespace
}  // namespace kinformer::cache
