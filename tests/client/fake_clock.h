#pragma once
// A client::Clock for tests: time stands still until a test (or a wait) moves it; waits return
// at once, advance the time and are recorded.

#include <functional>
#include <mutex>
#include <utility>
#include <vector>

#include "kinformer/client/clock.h"

namespace kinformer::testing {

class FakeClock : public client::Clock {
 public:
  TimePoint now() const override {
    std::lock_guard lock(mu_);
    return now_;
  }
  bool sleep_for(Duration d, std::stop_token stop) override {
    std::lock_guard lock(mu_);
    sleeps_.push_back(d);
    now_ += d;  // the wait lets time pass
    return !stop.stop_requested();
  }
  void advance(Duration d) {
    std::lock_guard lock(mu_);
    now_ += d;
  }
  std::vector<Duration> sleeps() const {
    std::lock_guard lock(mu_);
    return sleeps_;
  }

 private:
  mutable std::mutex mu_;
  TimePoint now_{};
  std::vector<Duration> sleeps_;
};

/// A clock made of functions: `now` tells the time; `sleep` (optional) is each wait, checked for
/// a stop request when it returns. Without `sleep`, waits are the real, stoppable ones. The
/// functions must be thread-safe when the clock is shared.
class FunctionClock : public client::Clock {
 public:
  explicit FunctionClock(std::function<TimePoint()> now, std::function<void(Duration)> sleep = {})
      : now_(std::move(now)), sleep_(std::move(sleep)) {}
  TimePoint now() const override { return now_(); }
  bool sleep_for(Duration d, std::stop_token stop) override {
    if (!sleep_) return client::system_clock()->sleep_for(d, stop);
    sleep_(d);
    return !stop.stop_requested();
  }

 private:
  std::function<TimePoint()> now_;
  std::function<void(Duration)> sleep_;
};

}  // namespace kinformer::testing
