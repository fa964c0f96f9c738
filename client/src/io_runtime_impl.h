#pragma once
// Private: what an IoRuntime is made of.

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <thread>
#include <vector>

#include "kinformer/client/io_runtime.h"

namespace kinformer::client {

struct IoRuntime::Impl {
  explicit Impl(std::size_t threads) : ioc(static_cast<int>(threads)) {}
  boost::asio::io_context ioc;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work{ioc.get_executor()};
  std::vector<std::thread> threads;
};

}  // namespace kinformer::client
