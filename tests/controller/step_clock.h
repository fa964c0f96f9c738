#pragma once
// StepClock: a Clock whose sleep_for blocks until the test steps it, so a test runs a loop that
// sleeps between tries (a LeaderElector) one try at a time, on a time of its own.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <stop_token>
#include <vector>

#include "fakes.h"
#include "kinformer/informer/clock.h"

namespace kinformer::testing {

/// One sleeper at a time. step() moves the time to the end of the current sleep, wakes the
/// sleeper and waits until it sleeps again: one iteration of its loop. A stop request ends a
/// sleep at once (sleep_for returns false) without moving the time.
class StepClock : public informer::Clock {
 public:
  TimePoint now() const override {
    std::lock_guard lock(mu_);
    return now_;
  }

  bool sleep_for(Duration d, std::stop_token stop) override {
    std::stop_callback wake(stop, [this] {
      std::lock_guard l(mu_);
      cv_.notify_all();
    });
    std::unique_lock lock(mu_);
    waits_.push_back(d);
    const std::size_t ticket = released_;
    sleeping_ = true;
    due_ = now_ + d;
    cv_.notify_all();
    cv_.wait(lock, [&] { return stop.stop_requested() || released_ != ticket; });
    sleeping_ = false;
    cv_.notify_all();
    return !stop.stop_requested();
  }

  /// Waits until the sleeper sleeps; false on the deadline.
  bool wait_sleeping() {
    std::unique_lock lock(mu_);
    return wait_until(lock, cv_, [&] { return sleeping_; });
  }

  /// Waits until the sleeper sleeps its `count`-th sleep (counted from the first); false on the
  /// deadline.
  bool wait_sleeps(std::size_t count) {
    std::unique_lock lock(mu_);
    return wait_until(lock, cv_, [&] { return sleeping_ && waits_.size() >= count; });
  }

  /// Moves the time forward by `d` without ending the current sleep (something else may wake
  /// the sleeper meanwhile, e.g. a stop token of its own).
  void advance(Duration d) {
    std::lock_guard lock(mu_);
    now_ += d;
  }

  /// Waits until the sleeper sleeps, moves the time to the end of its sleep, wakes it and waits
  /// until it sleeps again. False on the deadline.
  bool step() {
    std::unique_lock lock(mu_);
    if (!wait_until(lock, cv_, [&] { return sleeping_; })) return false;
    const std::size_t before = waits_.size();
    if (due_ > now_) now_ = due_;
    ++released_;
    cv_.notify_all();
    return wait_until(lock, cv_, [&] { return sleeping_ && waits_.size() > before; });
  }

  /// Every wait asked for, oldest first.
  std::vector<Duration> waits() const {
    std::lock_guard lock(mu_);
    return waits_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  TimePoint now_{std::chrono::hours(1000)};
  TimePoint due_{};
  std::vector<Duration> waits_;
  std::size_t released_ = 0;
  bool sleeping_ = false;
};

}  // namespace kinformer::testing
