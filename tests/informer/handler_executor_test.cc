// HandlerExecutor tests (label "concurrency"): run under TSan too. Deadlines are failure guards
// only; no test asserts on elapsed time.
#include "kinformer/informer/handler_executor.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <latch>
#include <mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "fakes.h"

namespace kinformer::informer {
namespace {

using namespace std::chrono_literals;
using testing::Gate;

// Failure guard only (never a measured time): generous, since TSan on a loaded 2-core machine
// runs these loops many times slower.
constexpr auto kDeadline = 30s;

/// Counts arrivals; wait_for(n) until at least n arrived or the deadline.
class Counter {
 public:
  void add(int n = 1) {
    std::lock_guard lock(mu_);
    count_ += n;
    cv_.notify_all();
  }
  bool wait_for(int n, std::chrono::milliseconds timeout = kDeadline) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return count_ >= n; });
  }
  int value() const {
    std::lock_guard lock(mu_);
    return count_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int count_ = 0;  // guarded by mu_
};

/// Closes every strand and waits until none of their drains runs, so the test's locals that the
/// drains use can be destroyed.
void close_all(const std::vector<StrandPtr>& strands) {
  for (const auto& s : strands) s->close();
  for (const auto& s : strands) EXPECT_TRUE(s->wait_idle(kDeadline)) << s->name();
}

HandlerExecutorOptions pool_of(std::size_t threads) {
  HandlerExecutorOptions options;
  options.threads = threads;
  return options;
}

// Mutant killed: a wake() of a running strand queues it again, so two workers drain it at once.
TEST(HandlerExecutorTest, DrainsOfOneStrandNeverOverlapAndKeepOrder) {
  constexpr int kProducers = 8;
  constexpr int kItems = 500;
  HandlerExecutor executor(pool_of(4));
  std::mutex mu;
  std::deque<std::pair<int, int>> queue;       // guarded by mu: (producer, seq)
  std::vector<int> last_seen(kProducers, -1);  // touched only inside drain()
  std::atomic<bool> in_drain{false};
  std::atomic<int> overlaps{0};
  std::atomic<int> out_of_order{0};
  Counter consumed;
  auto strand = executor.make_strand(
      [&] {
        if (in_drain.exchange(true)) overlaps.fetch_add(1);
        int taken = 0;
        bool more = false;
        for (; taken < 16; ++taken) {
          std::pair<int, int> item;
          {
            std::lock_guard lock(mu);
            if (queue.empty()) break;
            item = queue.front();
            queue.pop_front();
            more = !queue.empty();
          }
          if (item.second != last_seen[item.first] + 1) out_of_order.fetch_add(1);
          last_seen[item.first] = item.second;
          std::this_thread::yield();  // widen the window an overlapping drain would use
        }
        in_drain.store(false);
        consumed.add(taken);
        return more;
      },
      "serial");
  std::latch go(kProducers);
  std::vector<std::jthread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      go.arrive_and_wait();
      for (int i = 0; i < kItems; ++i) {
        {
          std::lock_guard lock(mu);
          queue.emplace_back(p, i);
        }
        strand->wake();
      }
    });
  }
  producers.clear();  // joins
  bool all = consumed.wait_for(kProducers * kItems);
  strand->close();  // also on failure: the drain must not outlive the state it uses
  ASSERT_TRUE(strand->wait_idle(kDeadline));
  ASSERT_TRUE(all);
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(out_of_order.load(), 0);
  EXPECT_EQ(consumed.value(), kProducers * kItems);
}

// Mutant killed: a wake() while drain() runs is dropped, so work added meanwhile is never seen.
TEST(HandlerExecutorTest, WakeDuringRunningDrainIsNotLost) {
  HandlerExecutor executor(pool_of(2));
  Gate entered;
  Gate go;
  Counter calls;
  auto strand = executor.make_strand(
      [&] {
        calls.add();
        if (calls.value() == 1) {
          entered.open();
          go.wait();
        }
        return false;  // nothing more, as far as this turn knows
      },
      "rewoken");
  strand->wake();
  ASSERT_TRUE(entered.wait());
  strand->wake();  // while running
  go.open();
  EXPECT_TRUE(calls.wait_for(2));
  close_all({strand});
}

// Mutant killed: a thread per strand (or per wake).
TEST(HandlerExecutorTest, ThousandStrandsShareTwoThreads) {
  constexpr int kStrands = 1000;
  constexpr int kTurns = 5;
  HandlerExecutor executor(pool_of(2));
  ASSERT_LE(executor.thread_count(), 3u);
  Counter turns;
  std::atomic<std::size_t> max_threads{0};
  std::vector<std::unique_ptr<std::atomic<int>>> left;
  std::vector<StrandPtr> strands;
  for (int i = 0; i < kStrands; ++i) {
    left.push_back(std::make_unique<std::atomic<int>>(kTurns));
    std::atomic<int>* mine = left.back().get();
    strands.push_back(executor.make_strand(
        [&, mine] {
          std::size_t seen = executor.thread_count();
          std::size_t prev = max_threads.load();
          while (seen > prev && !max_threads.compare_exchange_weak(prev, seen)) {
          }
          turns.add();
          return mine->fetch_sub(1) > 1;  // more turns to go
        },
        "s" + std::to_string(i)));
  }
  for (auto& s : strands) s->wake();
  ASSERT_TRUE(turns.wait_for(kStrands * kTurns));
  EXPECT_LE(max_threads.load(), 3u);
  EXPECT_LE(executor.thread_count(), 3u);
  EXPECT_EQ(executor.extra_threads_started(), 0u);
  for (auto& s : strands) s->close();
  for (auto& s : strands) EXPECT_TRUE(s->wait_idle(kDeadline));
  EXPECT_EQ(turns.value(), kStrands * kTurns);
}

// Mutant killed: every wake() puts the strand on the ready queue again (one schedule per
// notification instead of per batch).
TEST(HandlerExecutorTest, WakeOfScheduledStrandDoesNotScheduleAgain) {
  HandlerExecutorOptions options = pool_of(1);
  options.blocking_threshold = 60s;  // no replacement worker: the strand stays queued
  HandlerExecutor executor(options);
  Gate entered;
  Gate release;
  auto blocker = executor.make_strand(
      [&] {
        entered.open();
        release.wait();
        return false;
      },
      "blocker");
  Counter calls;
  auto batched = executor.make_strand(
      [&] {
        calls.add();
        return false;
      },
      "batched");
  blocker->wake();
  ASSERT_TRUE(entered.wait());
  for (int i = 0; i < 100; ++i) batched->wake();
  EXPECT_EQ(batched->schedules(), 1u);
  release.open();
  ASSERT_TRUE(calls.wait_for(1));
  batched->close();
  ASSERT_TRUE(batched->wait_idle(kDeadline));
  EXPECT_EQ(calls.value(), 1);
  EXPECT_EQ(batched->schedules(), 1u);
}

// wake_all() is wake() for many strands with one lock: each idle strand is scheduled once (a
// strand listed twice too), a closed one never runs, and a running one runs once more.
TEST(HandlerExecutorTest, WakeAllSchedulesEachStrandOnceAndSkipsClosedOnes) {
  HandlerExecutor executor(pool_of(2));
  Gate entered;
  Gate release;
  Counter running_calls;
  auto running = executor.make_strand(
      [&] {
        running_calls.add();
        if (running_calls.value() == 1) {
          entered.open();
          release.wait();
        }
        return false;
      },
      "running");
  running->wake();
  ASSERT_TRUE(entered.wait());

  constexpr int kStrands = 8;
  std::vector<StrandPtr> strands;
  std::vector<Counter> calls(kStrands);
  for (int i = 0; i < kStrands; ++i) {
    strands.push_back(executor.make_strand(
        [&calls, i] {
          calls[i].add();
          return false;
        },
        "s" + std::to_string(i)));
  }
  strands[kStrands - 1]->close();
  std::vector<HandlerExecutor::Strand*> woken;
  for (auto& s : strands) woken.push_back(s.get());
  woken.push_back(strands[0].get());  // listed twice
  woken.push_back(running.get());
  HandlerExecutor::wake_all(woken);
  for (int i = 0; i + 1 < kStrands; ++i) {
    ASSERT_TRUE(calls[i].wait_for(1)) << i;
    EXPECT_EQ(strands[i]->schedules(), 1u) << i;
  }
  release.open();
  ASSERT_TRUE(running_calls.wait_for(2));  // the wake while it ran was not lost
  strands.push_back(running);
  close_all(strands);
  for (int i = 0; i + 1 < kStrands; ++i) EXPECT_EQ(calls[i].value(), 1) << i;
  EXPECT_EQ(calls[kStrands - 1].value(), 0);
  EXPECT_EQ(strands[kStrands - 1]->schedules(), 0u);
}

// Mutant killed: a strand with more work is put back at the front of the ready queue.
TEST(HandlerExecutorTest, StrandWithEndlessWorkDoesNotStarveAnother) {
  HandlerExecutor executor(pool_of(1));
  std::atomic<long> hog_turns{0};
  auto hog = executor.make_strand(
      [&] {
        hog_turns.fetch_add(1);
        return true;  // always more
      },
      "hog");
  Gate other_ran;
  auto other = executor.make_strand(
      [&] {
        other_ran.open();
        return false;
      },
      "other");
  hog->wake();
  other->wake();
  EXPECT_TRUE(other_ran.wait());
  close_all({hog, other});
  EXPECT_GT(hog_turns.load(), 0);
}

// Mutant killed: no replacement worker for a blocked one. Pool 2, four strands blocked (more than
// the pool): all four get a worker, and other strands still complete their work.
TEST(HandlerExecutorTest, MoreStrandsBlockedThanThreadsOthersStillProgress) {
  constexpr int kBlocked = 4;
  constexpr int kOthers = 10;
  HandlerExecutorOptions options = pool_of(2);
  options.blocking_threshold = 10ms;
  HandlerExecutor executor(options);
  Gate release;
  Counter entered;
  std::vector<StrandPtr> stuck;
  for (int i = 0; i < kBlocked; ++i) {
    stuck.push_back(executor.make_strand(
        [&] {
          entered.add();
          release.wait();
          return false;
        },
        "stuck" + std::to_string(i)));
  }
  for (auto& s : stuck) s->wake();
  EXPECT_TRUE(entered.wait_for(kBlocked));  // needs two replacements

  Counter done;
  std::vector<StrandPtr> others;
  std::vector<std::unique_ptr<std::atomic<int>>> left;
  for (int i = 0; i < kOthers; ++i) {
    left.push_back(std::make_unique<std::atomic<int>>(3));
    std::atomic<int>* mine = left.back().get();
    others.push_back(executor.make_strand(
        [&, mine] {
          if (mine->fetch_sub(1) > 1) return true;
          done.add();
          return false;
        },
        "other" + std::to_string(i)));
  }
  for (auto& s : others) s->wake();
  EXPECT_TRUE(done.wait_for(kOthers));
  EXPECT_TRUE(
      testing::eventually([&] { return executor.blocked_workers() == std::size_t{kBlocked}; }));
  EXPECT_GE(executor.extra_threads_started(), 2u);
  EXPECT_LE(executor.thread_count(), 2u + 64u + 1u);

  release.open();
  close_all(stuck);
  close_all(others);
}

// Mutant killed: the cap on extra workers is ignored. Pool 2, cap 1, three strands blocked: the
// fourth strand waits for a worker until one returns.
TEST(HandlerExecutorTest, ExtraThreadCapIsRespected) {
  HandlerExecutorOptions options = pool_of(2);
  options.blocking_threshold = 10ms;
  options.max_extra_threads = 1;
  HandlerExecutor executor(options);
  Gate release;
  Counter entered;
  std::vector<StrandPtr> stuck;
  for (int i = 0; i < 3; ++i) {
    stuck.push_back(executor.make_strand(
        [&] {
          entered.add();
          release.wait();
          return false;
        },
        "stuck" + std::to_string(i)));
  }
  for (auto& s : stuck) s->wake();
  ASSERT_TRUE(entered.wait_for(3));  // the third needs the one extra worker
  Gate waiting_ran;
  auto waiting = executor.make_strand(
      [&] {
        waiting_ran.open();
        return false;
      },
      "waiting");
  waiting->wake();
  // Give a cap-ignoring monitor many ticks to start a fourth worker; correct code never runs it.
  EXPECT_FALSE(waiting_ran.wait(300ms));
  EXPECT_LE(executor.extra_threads_started(), 1u);
  EXPECT_LE(executor.thread_count(), 2u + 1u + 1u);

  release.open();
  EXPECT_TRUE(waiting_ran.wait());
  EXPECT_LE(executor.extra_threads_started(), 1u);
  close_all(stuck);
  close_all({waiting});
}

// Mutant killed: wait_idle() returns while drain() still runs; close() lets a queued turn start.
TEST(HandlerExecutorTest, CloseThenWaitIdleReturnsOnlyAfterTheDrainReturned) {
  HandlerExecutor executor(pool_of(1));
  Gate entered;
  Gate go;
  std::atomic<bool> returned{false};
  std::atomic<int> queued_calls{0};
  auto running = executor.make_strand(
      [&] {
        entered.open();
        go.wait();
        returned.store(true);
        return false;
      },
      "running");
  auto queued = executor.make_strand(
      [&] {
        queued_calls.fetch_add(1);
        return false;
      },
      "queued");
  running->wake();
  ASSERT_TRUE(entered.wait());
  queued->wake();  // behind `running` on the only worker
  queued->close();
  running->close();
  std::atomic<bool> saw_returned{false};
  Gate waited;
  std::jthread waiter([&] {
    EXPECT_TRUE(running->wait_idle(kDeadline));
    saw_returned.store(returned.load());
    waited.open();
  });
  // Let the waiter block first, so a wait_idle() that does not wait is caught.
  EXPECT_FALSE(waited.wait(50ms));
  go.open();
  ASSERT_TRUE(waited.wait());
  EXPECT_TRUE(saw_returned.load());
  // The worker has moved past `queued`'s turn once a later strand has run.
  Gate later_ran;
  auto later = executor.make_strand(
      [&] {
        later_ran.open();
        return false;
      },
      "later");
  later->wake();
  ASSERT_TRUE(later_ran.wait());
  EXPECT_EQ(queued_calls.load(), 0);
  running->wake();  // no-op after close()
  EXPECT_EQ(running->schedules(), 1u);
  close_all({later});
}

// Mutant killed: wait_idle() from inside the strand's own drain() waits for itself.
TEST(HandlerExecutorTest, WaitIdleFromOwnDrainReturnsAtOnce) {
  HandlerExecutor executor(pool_of(2));
  StrandPtr strand;
  std::atomic<bool> here{false};
  std::atomic<bool> idle_result{true};
  Gate finished;
  strand = executor.make_strand(
      [&] {
        here.store(strand->running_here());
        strand->close();
        idle_result.store(strand->wait_idle(3 * kDeadline));  // must not wait for itself
        finished.open();
        return false;
      },
      "self");
  EXPECT_FALSE(strand->running_here());
  strand->wake();
  ASSERT_TRUE(finished.wait());
  EXPECT_TRUE(here.load());
  EXPECT_FALSE(idle_result.load());
  EXPECT_TRUE(strand->wait_idle(kDeadline));
  EXPECT_FALSE(strand->running_here());
}

// Mutant killed: shutdown() waits for a stuck drain(), or a detached worker touches freed state.
TEST(HandlerExecutorTest, ShutdownWithStuckDrainIsBoundedAndTheDrainMayReturnLater) {
  struct Probe {
    Gate release;
    Gate entered;
    Gate dropped;  // the executor released its copy of the drain function
  };
  auto probe = std::make_shared<Probe>();
  struct OnDrop {
    std::shared_ptr<Probe> probe;
    ~OnDrop() {
      if (probe) probe->dropped.open();
    }
  };
  auto executor = std::make_unique<HandlerExecutor>(pool_of(2));
  auto guard = std::make_shared<OnDrop>(OnDrop{probe});
  auto stuck = executor->make_strand(
      [probe, guard] {
        probe->entered.open();
        probe->release.wait(std::chrono::hours(1));
        return true;  // more work: must not be requeued after shutdown
      },
      "stuck-forever");
  guard.reset();
  stuck->wake();
  ASSERT_TRUE(probe->entered.wait());

  Gate shut;
  std::thread stopper([&] {
    executor->shutdown(20ms);
    executor->shutdown(20ms);  // idempotent
    shut.open();
  });
  if (!shut.wait()) {
    stopper.detach();
    FAIL() << "shutdown() did not return with a stuck drain";
  }
  stopper.join();
  EXPECT_EQ(executor->thread_count(), 1u);  // only the stuck, detached worker
  stuck->wake();                            // no-op after shutdown
  executor.reset();                         // destructor: shutdown again, at once
  stuck.reset();
  probe->release.open();  // the detached worker returns into live state and exits
  EXPECT_TRUE(probe->dropped.wait());
}

// Mutant killed: shutdown() from inside a drain() waits for its own worker.
TEST(HandlerExecutorTest, ShutdownFromInsideADrainReturns) {
  HandlerExecutor executor(pool_of(2));
  Gate done;
  auto strand = executor.make_strand(
      [&] {
        executor.shutdown(3 * kDeadline);
        done.open();
        return false;
      },
      "stopper");
  strand->wake();
  EXPECT_TRUE(done.wait());
  strand->close();
  EXPECT_TRUE(strand->wait_idle(kDeadline));
}

TEST(HandlerExecutorTest, RejectsNonPositiveBlockingThreshold) {
  HandlerExecutorOptions options;
  options.blocking_threshold = 0ms;
  EXPECT_THROW(HandlerExecutor{options}, std::invalid_argument);
}

TEST(HandlerExecutorTest, DefaultPoolHasAtLeastTwoThreads) {
  HandlerExecutor executor;
  EXPECT_GE(executor.pool_size(), 2u);
  EXPECT_EQ(executor.thread_count(), executor.pool_size() + 1);
}

}  // namespace
}  // namespace kinformer::informer
