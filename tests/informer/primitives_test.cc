// Backoff, ReconnectBudget, the blocking pool.
// GCC 12 reports Asio's coroutine frame allocator as a mismatch (a false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
#include <algorithm>
#include <atomic>
#include <functional>
#include <latch>
#include <stdexcept>
#include <stop_token>
#include <system_error>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include "detail/await.h"
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
    ASSERT_TRUE(pool.submit([&] {
      all_in.count_down();
      release.wait();  // every job waits for all the others to have started: none is queued
      done.count_down();
    }));
  }
  all_in.wait();
  EXPECT_GE(pool.busy(), static_cast<std::size_t>(kJobs));
  release.count_down();
  done.wait();
  ASSERT_TRUE(testing::eventually([&] { return pool.busy() == 0; }));
  const std::size_t idle = pool.threads();
  EXPECT_GE(idle, static_cast<std::size_t>(kJobs));
  std::latch ran(1);
  ASSERT_TRUE(pool.submit([&] { ran.count_down(); }));
  ran.wait();
  ASSERT_TRUE(testing::eventually([&] { return pool.busy() == 0; }));
  EXPECT_EQ(pool.threads(), idle) << "an idle thread took the job";
  pool.trim();
  EXPECT_EQ(pool.threads(), 0u);
}

// Starts threads as std::thread does, except that the first `failures` starts fail as they do
// when the process is out of threads.
detail::BlockingPool::Starter failing_starter(std::shared_ptr<std::atomic<int>> failures,
                                              std::shared_ptr<std::atomic<int>> calls) {
  return [failures, calls](std::function<void()> body) {
    ++*calls;
    if (failures->fetch_sub(1) > 0) {
      throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again));
    }
    std::thread(std::move(body)).detach();
  };
}

TEST(BlockingPoolTest, AJobNoThreadCanTakeIsHandedBackNotKept) {
  auto failures = std::make_shared<std::atomic<int>>(1);
  auto calls = std::make_shared<std::atomic<int>>(0);
  detail::BlockingPool pool(failing_starter(failures, calls));
  std::atomic<int> ran{0};
  EXPECT_FALSE(pool.submit([&] { ++ran; }));
  EXPECT_EQ(pool.threads(), 0u);
  std::latch done(1);
  EXPECT_TRUE(pool.submit([&] { done.count_down(); }));
  done.wait();
  pool.trim();
  EXPECT_EQ(ran.load(), 0) << "the refused job was kept and ran later";
}

// A thread starter whose first start waits for first_may_fail and then fails (the process out of
// threads); later starts wait for later_may_start and then start the thread.
struct FirstStartFails {
  detail::BlockingPool::Starter starter() {
    return [this](std::function<void()> body) {
      if (++starts == 1) {
        first_started.count_down();
        first_may_fail.wait();
        throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again));
      }
      later_may_start.wait();
      std::thread(std::move(body)).detach();
    };
  }
  std::latch first_started{1};
  std::latch first_may_fail{1};
  std::latch later_may_start{1};
  std::atomic<int> starts{0};
};

// Two callers whose thread starts are both in progress; the first fails, the second then
// succeeds. The first hands back its own job, not the one queued after it: the second's job
// runs, the first's does not.
TEST(BlockingPoolTest, AFailedStartHandsBackItsOwnJobNotTheLastQueued) {
  FirstStartFails starts;
  detail::BlockingPool pool(starts.starter());
  std::atomic<int> first_ran{0};
  std::atomic<int> second_ran{0};
  bool first_taken = true;
  bool second_taken = false;
  std::thread first([&] { first_taken = pool.submit([&] { ++first_ran; }); });
  starts.first_started.wait();
  std::thread second([&] { second_taken = pool.submit([&] { ++second_ran; }); });
  // The second's job is queued (after the first's) before the first's start fails.
  const bool queued = testing::eventually([&] { return starts.starts.load() == 2; });
  starts.first_may_fail.count_down();
  first.join();
  starts.later_may_start.count_down();
  second.join();
  ASSERT_TRUE(queued);
  EXPECT_FALSE(first_taken);
  EXPECT_TRUE(second_taken);
  EXPECT_TRUE(testing::eventually([&] { return second_ran.load() == 1; }));
  pool.trim();
  EXPECT_EQ(first_ran.load(), 0) << "the refused job ran";
}

// A job whose own thread failed to start, but which another caller's thread took meanwhile, is
// not handed back: it ran, and its `then` answers the caller (once).
TEST(BlockingPoolTest, AJobTakenByAnotherThreadIsNotHandedBack) {
  FirstStartFails starts;
  starts.later_may_start.count_down();  // the second caller's thread starts at once
  detail::BlockingPool pool(starts.starter());
  std::atomic<int> first_ran{0};
  std::atomic<int> first_then{0};
  bool first_taken = false;
  std::thread first(
      [&] { first_taken = pool.submit([&] { ++first_ran; }, [&] { ++first_then; }); });
  starts.first_started.wait();
  std::latch second_ran(1);
  const bool second_taken = pool.submit([&] { second_ran.count_down(); });
  second_ran.wait();  // the second's thread ran the first's job before it (first in, first out)
  const bool both_done = testing::eventually([&] { return first_then.load() == 1; });
  pool.trim();  // and left: no thread is running when the first start fails
  starts.first_may_fail.count_down();
  first.join();
  EXPECT_TRUE(second_taken);
  EXPECT_TRUE(both_done);
  EXPECT_TRUE(first_taken) << "a job that ran was reported as refused";
  EXPECT_EQ(first_ran.load(), 1);
  EXPECT_EQ(first_then.load(), 1);
}

// A reflector's blocking call waits while no thread can be started, and runs once one can.
TEST(BlockingPoolTest, ACallOnThePoolIsRetriedUntilAThreadStarts) {
  auto failures = std::make_shared<std::atomic<int>>(3);
  auto calls = std::make_shared<std::atomic<int>>(0);
  detail::BlockingPool pool(failing_starter(failures, calls));
  boost::asio::io_context ioc;
  int result = 0;
  std::exception_ptr failure;
  auto job = [] { return 42; };
  const std::stop_token never;
  int told = 0;
  const std::function<void()> refused = [&] { ++told; };
  boost::asio::co_spawn(
      ioc,
      [&]() -> detail::awaitable<void> {
        const int got = co_await detail::on_pool(job, never, pool, &refused);
        result = got;
      },
      [&](const std::exception_ptr& e) { failure = e; });
  ioc.run();
  EXPECT_FALSE(failure);
  EXPECT_EQ(result, 42);
  EXPECT_EQ(calls->load(), 4) << "three refused starts, then one that ran the call";
  EXPECT_EQ(told, 1) << "the caller is told of the refusal once, not at every try";
}

// What the call throws reaches the caller.
TEST(BlockingPoolTest, WhatTheCallThrowsReachesTheCaller) {
  auto failures = std::make_shared<std::atomic<int>>(0);
  auto calls = std::make_shared<std::atomic<int>>(0);
  detail::BlockingPool pool(failing_starter(failures, calls));
  boost::asio::io_context ioc;
  std::exception_ptr failure;
  auto job = []() -> int { throw std::runtime_error("list failed"); };
  const std::stop_token never;
  int told = 0;
  const std::function<void()> refused = [&] { ++told; };
  boost::asio::co_spawn(
      ioc,
      [&]() -> detail::awaitable<void> { co_await detail::on_pool(job, never, pool, &refused); },
      [&](const std::exception_ptr& e) { failure = e; });
  ioc.run();
  EXPECT_EQ(told, 0) << "a thread started: nothing was refused";
  ASSERT_TRUE(failure);
  EXPECT_THROW(std::rethrow_exception(failure), std::runtime_error);
}

// A stop while no thread can be started ends the wait: the caller's loop ends as for a stop.
TEST(BlockingPoolTest, AStopEndsTheRetriesOfARefusedCall) {
  std::stop_source stop;
  std::atomic<int> calls{0};
  detail::BlockingPool pool([&](std::function<void()>) {
    if (++calls == 3) stop.request_stop();
    throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again));
  });
  boost::asio::io_context ioc;
  std::exception_ptr failure;
  std::atomic<int> ran{0};
  auto job = [&] { return ++ran; };
  const std::stop_token token = stop.get_token();
  boost::asio::co_spawn(
      ioc, [&]() -> detail::awaitable<void> { co_await detail::on_pool(job, token, pool); },
      [&](const std::exception_ptr& e) { failure = e; });
  ioc.run();
  EXPECT_EQ(calls.load(), 3);
  EXPECT_EQ(ran.load(), 0);
  ASSERT_TRUE(failure);
  EXPECT_TRUE(detail::ended_by_stop(failure));
  EXPECT_THROW(std::rethrow_exception(failure), detail::PoolStopped);
}

}  // namespace
}  // namespace kinformer::informer
