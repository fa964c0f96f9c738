#include "cli.h"

#include <gtest/gtest.h>

#include <sstream>

namespace kinformer::tools {
namespace {

Command parse(std::vector<std::string> args) { return parse_args(args); }

std::string usage_error(std::vector<std::string> args) {
  try {
    parse_args(args);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(Cli, ExitCodesAreStable) {
  EXPECT_EQ(kExitOk, 0);
  EXPECT_EQ(kExitCheckFailed, 1);
  EXPECT_EQ(kExitError, 2);
}

TEST(Cli, ParsesAudit) {
  auto c = parse({"audit", "--max-watches", "10", "--json", "--kubeconfig", "/k", "--context=ctx"});
  const auto& o = std::get<AuditOptions>(c);
  EXPECT_EQ(o.max_watches, 10);
  EXPECT_TRUE(o.json);
  EXPECT_EQ(o.common.kubeconfig, "/k");
  EXPECT_EQ(o.common.context, "ctx");
  EXPECT_FALSE(std::get<AuditOptions>(parse({"audit"})).max_watches.has_value());
}

TEST(Cli, ParsesCache) {
  auto c = parse({"cache", "--resource", "secrets", "-n", "ns", "-l", "app=x", "--field-selector",
                  "metadata.name=a", "--until-synced", "--dump", "-", "--events",
                  "--show-secret-data", "--timeout=5", "--watch-idle-timeout", "9"});
  const auto& o = std::get<CacheOptions>(c);
  EXPECT_EQ(o.resource, "secrets");
  EXPECT_EQ(o.namespace_, "ns");
  EXPECT_EQ(o.label_selector, "app=x");
  EXPECT_EQ(o.field_selector, "metadata.name=a");
  EXPECT_TRUE(o.until_synced);
  EXPECT_EQ(o.dump, "-");
  EXPECT_TRUE(o.events);
  EXPECT_TRUE(o.show_secret_data);
  EXPECT_EQ(o.timeout_seconds, 5);
  EXPECT_EQ(o.watch_idle_timeout_seconds, 9);
  EXPECT_FALSE(std::get<CacheOptions>(parse({"cache", "--resource", "pods"}))
                   .watch_idle_timeout_seconds.has_value());
}

TEST(Cli, ParsesDemoWithDefaults) {
  const auto d = std::get<DemoOptions>(parse({"demo"}));
  EXPECT_EQ(d.components, 20);
  EXPECT_EQ(d.duration_seconds, 20);
  EXPECT_FALSE(d.unshared);
  EXPECT_TRUE(d.namespace_.empty());
  const auto u = std::get<DemoOptions>(
      parse({"demo", "--components", "50", "--unshared", "--duration", "3", "--namespace", "x"}));
  EXPECT_EQ(u.components, 50);
  EXPECT_TRUE(u.unshared);
  EXPECT_EQ(u.duration_seconds, 3);
  EXPECT_EQ(u.namespace_, "x");
}

TEST(Cli, HelpAnywhere) {
  EXPECT_EQ(std::get<HelpCommand>(parse({"--help"})).topic, "");
  EXPECT_EQ(std::get<HelpCommand>(parse({"help", "demo"})).topic, "demo");
  EXPECT_EQ(std::get<HelpCommand>(parse({"cache", "-h"})).topic, "cache");
  EXPECT_NE(usage("audit").find("--max-watches"), std::string::npos);
  EXPECT_NE(usage().find("Exit status"), std::string::npos);
}

TEST(Cli, UsageErrorsNameTheProblem) {
  EXPECT_EQ(usage_error({}), "missing subcommand (audit, cache, demo, clusters or endpoints)");
  EXPECT_NE(usage_error({"frobnicate"}).find("unknown subcommand 'frobnicate'"), std::string::npos);
  EXPECT_EQ(usage_error({"audit", "--bogus"}), "audit: unknown flag --bogus");
  EXPECT_EQ(usage_error({"audit", "stray"}), "audit: unexpected argument 'stray'");
  EXPECT_EQ(usage_error({"audit", "--max-watches"}), "audit: --max-watches needs a value");
  EXPECT_EQ(usage_error({"audit", "--max-watches", "ten"}),
            "audit: --max-watches expects a whole number, got 'ten'");
  EXPECT_NE(usage_error({"audit", "--max-watches", "-1"}).find("must be between 0"),
            std::string::npos);
  EXPECT_EQ(usage_error({"audit", "--json=yes"}), "audit: --json takes no value");
  EXPECT_NE(usage_error({"cache"}).find("--resource is required"), std::string::npos);
  EXPECT_NE(usage_error({"cache", "--resource", "pods", "--dump", ""}).find("--dump needs a file"),
            std::string::npos);
  EXPECT_NE(usage_error({"cache", "--resource", "pods", "--timeout", "0"})
                .find("--timeout must be between 1"),
            std::string::npos);
  EXPECT_NE(usage_error({"demo", "--components", "0"}).find("--components must be between 1"),
            std::string::npos);
  EXPECT_EQ(usage_error({"demo", "--kubeconfig"}), "demo: --kubeconfig needs a value");
}

TEST(Cli, LogLinesAreKeyValueAndQuoted) {
  std::ostringstream out;
  log_line(out, "error", "no permission",
           {{"resource", "secrets"}, {"why", "a \"b\"\nc"}, {"empty", ""}});
  EXPECT_EQ(out.str(),
            "kwatch level=error msg=\"no permission\" resource=secrets why=\"a \\\"b\\\"\\nc\" "
            "empty=\"\"\n");
}

}  // namespace
}  // namespace kinformer::tools
