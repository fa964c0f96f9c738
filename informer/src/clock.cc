#include "kinformer/informer/clock.h"

#include <condition_variable>
#include <mutex>
#include <random>

namespace kinformer::informer {
namespace {

class SystemClock final : public Clock {
 public:
  TimePoint now() const override { return std::chrono::steady_clock::now(); }
  bool sleep_for(Duration duration, std::stop_token stop) override {
    std::mutex mu;
    std::condition_variable_any cv;
    std::unique_lock lock(mu);
    cv.wait_for(lock, stop, duration, [] { return false; });
    return !stop.stop_requested();
  }
};

}  // namespace

ClockPtr system_clock() {
  static const ClockPtr clock = std::make_shared<SystemClock>();
  return clock;
}

RandomSource default_random() {
  struct State {
    std::mutex mu;
    std::mt19937_64 engine{std::random_device{}()};
  };
  auto state = std::make_shared<State>();
  return [state] {
    std::lock_guard lock(state->mu);
    return std::uniform_real_distribution<double>(0.0, 1.0)(state->engine);
  };
}

}  // namespace kinformer::informer
