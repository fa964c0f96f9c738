#include "kinformer/informer/clock.h"

#include <memory>
#include <mutex>
#include <random>

namespace kinformer::informer {

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
