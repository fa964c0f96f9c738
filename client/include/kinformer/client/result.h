#pragma once
// Result<T>: a value or an Error. A small C++20 stand-in for std::expected<T, Error>. The error
// type is Error unless a layer's errors carry more (Result<T, E>).

#include <cassert>
#include <utility>
#include <variant>

#include "kinformer/client/error.h"

namespace kinformer::client {

template <typename T, typename E = Error>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT(implicit)
  Result(E error) : v_(std::in_place_index<1>, std::move(error)) {}  // NOLINT(implicit)

  [[nodiscard]] bool ok() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }

  T& value() & {
    assert(ok());
    return std::get<0>(v_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<0>(v_);
  }
  T&& value() && {
    assert(ok());
    return std::get<0>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const E& error() const& {
    assert(!ok());
    return std::get<1>(v_);
  }
  E&& error() && {
    assert(!ok());
    return std::get<1>(std::move(v_));
  }

 private:
  std::variant<T, E> v_;
};

/// Result of an operation with no value.
struct Ok {};
using Status = Result<Ok>;

}  // namespace kinformer::client
