#include "kinformer/client/io_runtime.h"

#include <algorithm>
#include <cassert>

#include "io_runtime_impl.h"

namespace kinformer::client {
namespace {

// The runtime whose thread this is (null elsewhere).
thread_local const IoRuntime* tl_runtime = nullptr;

}  // namespace

IoRuntime::IoRuntime(std::size_t threads)
    : impl_(std::make_unique<Impl>(std::max<std::size_t>(threads, 1))) {
  const std::size_t n = std::max<std::size_t>(threads, 1);
  impl_->threads.reserve(n);
  try {
    for (std::size_t i = 0; i < n; ++i) {
      impl_->threads.emplace_back([this] {
        tl_runtime = this;
        impl_->ioc.run();
      });
    }
  } catch (...) {  // a thread that could not start: stop the others before the error leaves
    impl_->work.reset();
    impl_->ioc.stop();
    for (auto& t : impl_->threads) t.join();
    throw;
  }
}

// NOLINTNEXTLINE(bugprone-exception-escape): only a failed join can throw: terminate
IoRuntime::~IoRuntime() {
  impl_->work.reset();
  impl_->ioc.stop();
  // Never on one of its own threads: clients refuse calls there, and nothing running there
  // holds a runtime (transports' coroutines hold their transport by a plain pointer). Debug
  // builds check it; a release build leaks the runtime rather than join itself or free the
  // io_context that thread still runs in.
  assert(!running_in_this_thread());
  if (running_in_this_thread()) {
    for (auto& t : impl_->threads) t.detach();
    static_cast<void>(impl_.release());
    return;
  }
  for (auto& t : impl_->threads) t.join();
}

std::size_t IoRuntime::threads() const noexcept { return impl_->threads.size(); }

bool IoRuntime::running_in_this_thread() const noexcept { return tl_runtime == this; }

std::size_t IoRuntime::default_threads() noexcept {
  return std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, 4);
}

}  // namespace kinformer::client
