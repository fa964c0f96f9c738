#pragma once
// Injected time and randomness for informer/. The Clock is the client's (one Clock type in
// kinformer: client::RateLimiter, informer::ReconnectBudget and the reflector share it); the
// names here keep informer code and its users unqualified.

#include <functional>

#include "kinformer/client/clock.h"

namespace kinformer::informer {

using Clock = client::Clock;
using ClockPtr = client::ClockPtr;
using client::system_clock;

/// Uniform random numbers in [0, 1). Must be thread-safe when shared.
using RandomSource = std::function<double()>;

/// A thread-safe RandomSource seeded from std::random_device.
RandomSource default_random();

}  // namespace kinformer::informer
