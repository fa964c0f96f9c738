// Concurrency tests for Store: run under TSan (label "concurrency").
#include <atomic>
#include <thread>

#include <gtest/gtest.h>

#include "kinformer/cache/store.h"
#include "test_object.h"

namespace kinformer::cache {
namespace {

TEST(StoreConcurrencyTest, ReadersAndWritersDoNotRace) {
  Store s;
  s.add_index("app", [](const client::Object& o) {
    const std::string* v = client::find_value(o.metadata.labels, "app");
    return v ? std::vector<std::string>{*v} : std::vector<std::string>{};
  });
  std::atomic<bool> done{false};
  std::vector<std::jthread> threads;
  for (int w = 0; w < 2; ++w) {
    threads.emplace_back([&s, w] {
      for (int i = 0; i < 2000; ++i) {
        auto name = "o" + std::to_string(i % 50);
        s.upsert(testing::make_object("ns" + std::to_string(w), name, std::to_string(i),
                                      {{"app", i % 2 ? "a" : "b"}}));
        if (i % 7 == 0) (void)s.remove("ns" + std::to_string(w) + "/" + name);
        if (i % 500 == 0) s.replace({testing::make_object("ns", "r", "1")}, std::to_string(i));
      }
    });
  }
  std::atomic<std::size_t> seen{0};
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&] {
      while (!done.load()) {
        for (const auto& o : s.list()) seen += o->metadata.name.size();
        seen += s.by_index("app", "a").size();
        seen += s.list_namespace("ns0").size();
        seen += s.list(LabelSelector::parse("app=b")).size();
        if (auto o = s.get("ns1/o3")) seen += o->metadata.resource_version.size();
        s.for_each([&](const client::ObjectPtr& o) { seen += o->key().size(); });
      }
    });
  }
  threads[0].join();
  threads[1].join();
  s.add_index("late",
              [](const client::Object& o) { return std::vector<std::string>{o.metadata.name}; });
  done = true;
  threads.clear();
  EXPECT_GT(seen.load(), 0u);
}

}  // namespace
}  // namespace kinformer::cache
