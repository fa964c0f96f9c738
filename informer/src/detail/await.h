#pragma once
// Private: what a reflector's loop awaits on its runtime (C++20 coroutines on Asio): a call on
// the blocking pool, the next event of a watch stream, a wait on its clock. None of them holds a
// runtime thread while it waits.

#include <algorithm>
#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <type_traits>
#include <utility>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "detail/blocking_pool.h"
#include "kinformer/client/watch.h"
#include "kinformer/informer/clock.h"

namespace kinformer::informer::detail {

namespace asio = boost::asio;
template <class T>
using awaitable = asio::awaitable<T>;
// A completion token that hands the error code back instead of throwing.
inline constexpr auto kAsTuple = asio::as_tuple(asio::use_awaitable);

// Completes an awaiting coroutine later, from any thread: its handler is resumed on its own
// executor, which is kept from running out of work meanwhile (a private io_context's run()).
template <class Handler>
auto resumer(Handler handler) {
  auto work = asio::prefer(asio::get_associated_executor(handler),
                           asio::execution::outstanding_work.tracked);
  return [h = std::make_shared<Handler>(std::move(handler)), work](auto... result) {
    asio::post(work, [h, ... r = std::move(result)]() mutable { std::move (*h)(std::move(r)...); });
  };
}

/// Thrown by on_pool when `stop` was requested while no pool thread could be started for the
/// call: the awaiting loop ends as for a stop (see ended_by_stop()).
struct PoolStopped : std::exception {
  [[nodiscard]] const char* what() const noexcept override {
    return "stopped while no thread could be started for a blocking call";
  }
};

/// True if a coroutine ended with nothing (a clean end) or with PoolStopped.
inline bool ended_by_stop(const std::exception_ptr& e) {
  if (!e) return true;
  try {
    std::rethrow_exception(e);
  } catch (const PoolStopped&) {
    return true;
  } catch (...) {
    return false;
  }
}

/// Waits `duration` on a timer of the caller's executor; false when `stop` was requested.
inline awaitable<bool> timer_wait(Clock::Duration duration, const std::stop_token& stop) {
  if (stop.stop_requested()) co_return false;
  auto ex = co_await asio::this_coro::executor;
  auto timer = std::make_shared<asio::steady_timer>(ex);
  // The timer runs on this coroutine's executor: a stop from another thread cancels it there.
  std::stop_callback on_stop(stop, [timer, ex] { asio::post(ex, [timer] { timer->cancel(); }); });
  while (duration > Clock::Duration::zero() && !stop.stop_requested()) {
    // At most a day per wait: steady_timer's time point must not overflow.
    const Clock::Duration step = std::min<Clock::Duration>(duration, std::chrono::hours(24));
    timer->expires_after(step);
    auto [ec] = co_await timer->async_wait(kAsTuple);
    static_cast<void>(ec);  // cancelled: stop was requested (checked above)
    duration -= step;
  }
  co_return !stop.stop_requested();
}

/// Runs `fn()` on `pool`; the caller resumes with its result on its own executor. An exception
/// thrown by `fn` is rethrown to the caller. While no pool thread can be started, the call is
/// tried again after a short wait (10 ms, doubling to 1 s), or PoolStopped is thrown once `stop`
/// is requested; `refused` (if not null) is called at the first refusal, so the caller can say
/// why it waits. `stop` and `*refused` must outlive the call (the caller's named values: a
/// defaulted std::function would be a temporary spanning the co_await, which GCC 12 mishandles).
template <class F>
awaitable<std::invoke_result_t<F&>> on_pool(F fn, const std::stop_token& stop,
                                            BlockingPool& pool = BlockingPool::instance(),
                                            const std::function<void()>* refused = nullptr) {
  static_assert(std::is_copy_constructible_v<F>, "each try hands the pool a copy of fn");
  using R = std::invoke_result_t<F&>;
  // Completes with no value and no exception when the pool could not take the job.
  auto initiate = [&pool](auto handler, F job) {
    struct Outcome {
      std::exception_ptr error;
      std::optional<R> value;
    };
    auto outcome = std::make_shared<Outcome>();
    auto resume = resumer(std::move(handler));
    // The result is handed back once the pool counts the thread idle again (BlockingPool::submit):
    // the caller's next blocking call then reuses it.
    const bool taken = pool.submit(
        [job = std::move(job), outcome]() mutable {
          try {
            outcome->value.emplace(job());
          } catch (...) {
            outcome->error = std::current_exception();
          }
        },
        [outcome, resume]() mutable { resume(outcome->error, std::move(outcome->value)); });
    if (!taken) resume(std::exception_ptr{}, std::optional<R>{});
  };
  Clock::Duration retry = std::chrono::milliseconds(10);
  bool told = false;  // refused() was called
  for (;;) {
    std::optional<R> result =
        co_await asio::async_initiate<const asio::use_awaitable_t<>&,
                                      void(std::exception_ptr, std::optional<R>)>(
            initiate, asio::use_awaitable, fn);
    if (result) co_return std::move(*result);
    if (refused != nullptr && !told) {
      told = true;
      (*refused)();
    }
    const bool waited = co_await timer_wait(retry, stop);
    if (!waited) throw PoolStopped{};
    retry = std::min<Clock::Duration>(retry * 2, std::chrono::seconds(1));
  }
}

/// The stream's next event. A stream that can say when it is ready (the client's) is waited for
/// without a thread; any other is read on the blocking pool.
inline awaitable<client::Result<std::optional<client::WatchEvent>>> next_event(
    client::WatchStream& stream, const std::stop_token& stop) {
  if (stream.buffered() > 0) co_return stream.next();  // received already: does not block
  auto initiate = [&stream](auto handler) {
    auto resume = resumer(std::move(handler));
    if (!stream.notify_when_ready([resume]() mutable { resume(true); })) resume(false);
  };
  const bool ready = co_await asio::async_initiate<const asio::use_awaitable_t<>&, void(bool)>(
      initiate, asio::use_awaitable);
  if (ready) co_return stream.next();  // does not block now
  auto read = [&stream] { return stream.next(); };
  auto next = co_await on_pool(read, stop);
  co_return next;
}

/// Waits `duration` on `clock`; false when `stop` was requested. The system clock waits on a
/// timer of the caller's executor; an injected one (tests) in its sleep_for on the pool. `clock`
/// and `stop` must outlive the wait (the caller's: references, so that no temporary spans the
/// co_await, which GCC 12 mishandles).
inline awaitable<bool> sleep_for(const ClockPtr& clock, Clock::Duration duration,
                                 const std::stop_token& stop) {
  if (stop.stop_requested()) co_return false;
  if (clock.get() != system_clock().get()) {
    auto sleep = [&clock, duration, &stop] { return clock->sleep_for(duration, stop); };
    const bool slept = co_await on_pool(sleep, stop);
    co_return slept;
  }
  const bool waited = co_await timer_wait(duration, stop);
  co_return waited;
}

}  // namespace kinformer::informer::detail
