// The optional /metrics exposer serves a factory's PrometheusRegistry over real HTTP.

#include "kinformer/prometheus/metrics_exposer.h"

#include <gtest/gtest.h>

#include <prometheus/registry.h>

#include "kinformer/client/rest_client.h"
#include "kinformer/prometheus/prometheus_registry.h"
#include "test_env.h"

namespace kinformer::testing {
namespace {

TEST(MetricsExposer, ServesTheFactoryRegistryOverHttp) {
  auto metrics = std::make_shared<prom::PrometheusRegistry>();
  Env env({.registry = metrics});
  env.fake->set_default_list({}, "10");
  auto& informer = env.factory->informer(test_type("secrets"));
  auto registration = informer.add_handler(std::make_shared<informer::ResourceEventHandlerFuncs>(),
                                           {.name = "exposer-test"});
  prom::MetricsExposer exposer("127.0.0.1:0", metrics->registry_ptr());
  ASSERT_NE(exposer.port(), 0);

  client::ClusterConfig config;
  config.server = "http://127.0.0.1:" + std::to_string(exposer.port());
  client::RestClient http(config);
  auto response = http.get_raw("/metrics");
  ASSERT_TRUE(response) << response.error().to_string();
  EXPECT_EQ(response->status, 200);
  // The handler reference count of the secrets informer, as a scraper reads it.
  std::string line;
  for (std::size_t pos = 0; pos < response->body.size();) {
    const auto end = response->body.find('\n', pos);
    std::string l = response->body.substr(pos, end - pos);
    if (l.rfind("kinformer_registered_handlers{", 0) == 0 &&
        l.find("resource=\"secrets\"") != std::string::npos)
      line = l;
    pos = end == std::string::npos ? response->body.size() : end + 1;
  }
  ASSERT_FALSE(line.empty()) << response->body.substr(0, 2000);
  EXPECT_EQ(line.substr(line.rfind(' ') + 1), "1") << line;
}

TEST(MetricsExposer, AnAddressItCannotBindIsAConfigErrorNamingIt) {
  auto registry = std::make_shared<prometheus::Registry>();
  try {
    prom::MetricsExposer exposer("256.0.0.1:1", registry);
    FAIL() << "expected a ConfigError";
  } catch (const client::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("256.0.0.1:1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kinformer::testing
