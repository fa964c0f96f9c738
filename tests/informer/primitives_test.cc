// Backoff, ReconnectBudget.
#include <algorithm>
#include <atomic>
#include <latch>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "detail/blocking_pool.h"
#include "fakes.h"
#include "kinformer/informer/backoff.h"
#include "kinformer/informer/reconnect_budget.h"

namespace kinformer::informer {
namespace {

using namespace std::chrono_literals;
using ms = std::chrono::milliseconds;

ms as_ms(Clock::Duration d) { return std::chrono::duration_cast<ms>(d); }

TEST(BackoffTest, ClientGoDefaultsWithFixedRandom) {
  auto clock = std::make_shared<testing::ManualClock>();
  JitteredExponentialBackoff b(BackoffOptions{}, clock, [] { return 0.5; });
  std::vector<ms> got;
  for (int i = 0; i < 8; ++i) got.push_back(as_ms(b.next()));
  EXPECT_EQ(got,
            (std::vector<ms>{1200ms, 2400ms, 4800ms, 9600ms, 19200ms, 38400ms, 45000ms, 45000ms}));
  clock->advance(2min);  // healthy for the reset period
  EXPECT_EQ(as_ms(b.next()), 1200ms);
  EXPECT_EQ(as_ms(b.next()), 2400ms);
  b.reset();
  EXPECT_EQ(as_ms(b.next()), 1200ms);
}

TEST(BackoffTest, ZeroRandomIsTheBareExponential) {
  auto clock = std::make_shared<testing::ManualClock>();
  BackoffOptions o;
  o.initial = 100ms;
  o.max = 1s;
  JitteredExponentialBackoff b(o, clock, [] { return 0.0; });
  std::vector<ms> got;
  for (int i = 0; i < 6; ++i) got.push_back(as_ms(b.next()));
  EXPECT_EQ(got, (std::vector<ms>{100ms, 200ms, 400ms, 800ms, 1000ms, 1000ms}));
}

TEST(ReconnectBudgetTest, BurstThenRateAndDenials) {
  auto clock = std::make_shared<testing::ManualClock>();
  ReconnectBudget budget({.burst = 2, .per_second = 2}, clock);
  EXPECT_EQ(budget.reserve(), Clock::Duration::zero());
  EXPECT_EQ(budget.reserve(), Clock::Duration::zero());
  EXPECT_EQ(as_ms(budget.reserve()), 500ms);
  EXPECT_EQ(as_ms(budget.reserve()), 1000ms);  // reservations queue
  EXPECT_EQ(budget.denials(), 2u);
  EXPECT_FALSE(budget.try_acquire());
  EXPECT_EQ(budget.denials(), 3u);
  clock->advance(10s);
  EXPECT_TRUE(budget.try_acquire());
  EXPECT_EQ(budget.reserve(), Clock::Duration::zero());
  EXPECT_EQ(as_ms(budget.reserve()), 500ms);
}

TEST(ReconnectBudgetTest, DefaultsAreDocumented) {
  ReconnectBudgetOptions o;
  EXPECT_EQ(o.burst, 10);
  EXPECT_EQ(o.per_second, 2);
  EXPECT_EQ(o.burst_per_informer, 2);
  EXPECT_EQ(o.per_second_per_informer, 0.5);
}

// 50 informers after an API-server restart need ~100 requests (a rewatch and a relist each):
// the bucket of 50 informers holds 110 at once, and refills at 27/s.
TEST(ReconnectBudgetTest, GrowsWithTheInformersItServes) {
  auto clock = std::make_shared<testing::ManualClock>();
  ReconnectBudget budget(ReconnectBudgetOptions{}, clock);
  EXPECT_EQ(budget.burst(), 10);
  for (int i = 0; i < 50; ++i) budget.add_informer();
  EXPECT_EQ(budget.informers(), 50u);
  EXPECT_EQ(budget.burst(), 110);
  EXPECT_EQ(budget.per_second(), 27);
  for (int i = 0; i < 110; ++i) ASSERT_EQ(budget.reserve(), Clock::Duration::zero()) << i;
  EXPECT_EQ(budget.denials(), 0u);
  EXPECT_EQ(as_ms(budget.reserve()), 37ms);  // 1/27 s
  EXPECT_EQ(budget.denials(), 1u);
  // Emptied, the bucket refills at the grown rate, never above the grown burst.
  clock->advance(1h);
  for (int i = 0; i < 110; ++i) ASSERT_TRUE(budget.try_acquire()) << i;
  EXPECT_FALSE(budget.try_acquire());
}

// The per-informer share of the burst is there as soon as the informer is; the rate grows too.
TEST(ReconnectBudgetTest, AnInformerAddedLaterBringsItsShareAtOnce) {
  auto clock = std::make_shared<testing::ManualClock>();
  ReconnectBudget budget(
      {.burst = 1, .per_second = 1, .burst_per_informer = 3, .per_second_per_informer = 1}, clock);
  EXPECT_EQ(budget.reserve(), Clock::Duration::zero());
  EXPECT_EQ(as_ms(budget.reserve()), 1000ms);  // 1/s; tokens at -1
  budget.add_informer();                       // -1 + 3: two available now, rate 2/s
  EXPECT_EQ(budget.reserve(), Clock::Duration::zero());
  EXPECT_EQ(budget.reserve(), Clock::Duration::zero());
  EXPECT_EQ(as_ms(budget.reserve()), 500ms);
}

// The bound, in the worst case: N informers whose server fails every request and that retry as
// soon as the budget lets them (no backoff at all). Simulated on the injected clock, one
// attempt at a time in time order. In every window of w seconds there are at most
// burst(N) + per_second(N) * w attempts (+1 for the attempt at the window's edge), and the
// budget, not the simulation, is what limits them: over 60 s they get within N of that.
TEST(ReconnectBudgetTest, HotLoopOfManyFailingInformersIsBoundedByBurstPlusRate) {
  constexpr int kInformers = 50;
  constexpr double kHorizon = 60;
  auto clock = std::make_shared<testing::ManualClock>();
  ReconnectBudget budget(ReconnectBudgetOptions{}, clock);
  for (int i = 0; i < kInformers; ++i) budget.add_informer();
  const double burst = budget.burst();
  const double rate = budget.per_second();
  const auto t0 = clock->now();
  auto seconds = [&](Clock::TimePoint t) { return std::chrono::duration<double>(t - t0).count(); };
  // Each informer's first request (its initial list, which the reflector does not charge) is
  // at t0; every later one is a retry that reserved a token.
  std::vector<Clock::TimePoint> next(kInformers, t0);  // each informer's next retry
  for (auto& n : next) n += budget.reserve();
  std::vector<double> attempts;  // retry times, in order
  for (;;) {
    auto it = std::min_element(next.begin(), next.end());
    if (seconds(*it) > kHorizon) break;
    clock->advance(*it - clock->now());
    attempts.push_back(seconds(clock->now()));
    *it = clock->now() + budget.reserve();  // failed at once: the retry waits only for the budget
  }
  for (double w : {1.0, 5.0, 10.0, 30.0, kHorizon}) {
    std::size_t lo = 0;
    for (std::size_t hi = 0; hi < attempts.size(); ++hi) {
      while (attempts[hi] - attempts[lo] > w) ++lo;
      ASSERT_LE(static_cast<double>(hi - lo + 1), burst + rate * w + 1)
          << "window " << w << " s ending at " << attempts[hi];
    }
  }
  EXPECT_GE(static_cast<double>(attempts.size()), burst + rate * kHorizon - kInformers);
  EXPECT_LE(static_cast<double>(attempts.size()), burst + rate * kHorizon + 1);
}

// The blocking pool runs every job, a thread per job in flight (jobs that block one another all
// run), reuses an idle thread, and lets idle threads go.
TEST(BlockingPoolTest, AThreadPerJobInFlightReusedThenLetGo) {
  auto& pool = informer::detail::BlockingPool::instance();
  pool.trim();
  constexpr int kJobs = 6;
  std::latch all_in(kJobs);
  std::latch release(1);
  std::latch done(kJobs);
  for (int i = 0; i < kJobs; ++i) {
    pool.submit([&] {
      all_in.count_down();
      release.wait();  // every job waits for all the others to have started: none is queued
      done.count_down();
    });
  }
  all_in.wait();
  EXPECT_GE(pool.busy(), static_cast<std::size_t>(kJobs));
  release.count_down();
  done.wait();
  ASSERT_TRUE(testing::eventually([&] { return pool.busy() == 0; }));
  const std::size_t idle = pool.threads();
  EXPECT_GE(idle, static_cast<std::size_t>(kJobs));
  std::latch ran(1);
  pool.submit([&] { ran.count_down(); });
  ran.wait();
  ASSERT_TRUE(testing::eventually([&] { return pool.busy() == 0; }));
  EXPECT_EQ(pool.threads(), idle) << "an idle thread took the job";
  pool.trim();
  EXPECT_EQ(pool.threads(), 0u);
}

}  // namespace
}  // namespace kinformer::informer
