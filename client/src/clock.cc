#include "kinformer/client/clock.h"

#include <condition_variable>
#include <mutex>

namespace kinformer::client {
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

}  // namespace kinformer::client
