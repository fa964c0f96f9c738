#include "tcp_proxy.h"

#include <array>
#include <atomic>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

namespace kinformer::e2e {

namespace asio = boost::asio;
using asio::ip::tcp;
using Socket = asio::as_tuple_t<asio::use_awaitable_t<>>::as_default_on_t<tcp::socket>;

struct TcpProxy::Impl : std::enable_shared_from_this<TcpProxy::Impl> {
  asio::io_context io;
  tcp::acceptor acceptor{io};
  tcp::endpoint upstream;
  std::atomic<bool> blocked{false};
  std::atomic<std::uint64_t> forwarded{0};
  // Both sockets of every live connection; only touched on the io thread.
  std::vector<std::weak_ptr<tcp::socket>> live;
  std::thread thread;

  asio::awaitable<void> pump(std::shared_ptr<tcp::socket> from, std::shared_ptr<tcp::socket> to) {
    std::array<char, 16384> buf;
    while (true) {
      auto [ec, n] = co_await from->async_read_some(asio::buffer(buf),
                                                    asio::as_tuple(asio::use_awaitable));
      if (ec) break;
      auto [wec, wn] = co_await asio::async_write(*to, asio::buffer(buf.data(), n),
                                                  asio::as_tuple(asio::use_awaitable));
      if (wec) break;
    }
    boost::system::error_code ignored;
    from->close(ignored);
    to->close(ignored);
  }

  asio::awaitable<void> serve(std::shared_ptr<tcp::socket> client) {
    if (blocked) {
      boost::system::error_code ignored;
      client->close(ignored);
      co_return;
    }
    auto server = std::make_shared<tcp::socket>(io);
    auto [ec] = co_await server->async_connect(upstream, asio::as_tuple(asio::use_awaitable));
    if (ec || blocked) {
      boost::system::error_code ignored;
      client->close(ignored);
      server->close(ignored);
      co_return;
    }
    ++forwarded;
    live.push_back(client);
    live.push_back(server);
    asio::co_spawn(io, pump(client, server), asio::detached);
    asio::co_spawn(io, pump(server, client), asio::detached);
  }

  asio::awaitable<void> accept_loop() {
    while (true) {
      auto socket = std::make_shared<tcp::socket>(io);
      auto [ec] = co_await acceptor.async_accept(*socket, asio::as_tuple(asio::use_awaitable));
      if (ec) co_return;
      asio::co_spawn(io, serve(std::move(socket)), asio::detached);
    }
  }

  void close_all() {
    for (auto& weak : live) {
      if (auto s = weak.lock()) {
        boost::system::error_code ignored;
        s->close(ignored);
      }
    }
    live.clear();
  }
};

TcpProxy::TcpProxy(std::string upstream_host, std::uint16_t upstream_port)
    : impl_(std::make_shared<Impl>()) {
  impl_->upstream = tcp::endpoint(asio::ip::make_address(upstream_host), upstream_port);
  tcp::endpoint local(asio::ip::make_address("127.0.0.1"), 0);
  impl_->acceptor.open(local.protocol());
  impl_->acceptor.set_option(tcp::acceptor::reuse_address(true));
  impl_->acceptor.bind(local);
  impl_->acceptor.listen();
  asio::co_spawn(impl_->io, impl_->accept_loop(), asio::detached);
  impl_->thread = std::thread([impl = impl_] { impl->io.run(); });
}

TcpProxy::~TcpProxy() {
  asio::post(impl_->io, [impl = impl_] {
    boost::system::error_code ignored;
    impl->acceptor.close(ignored);
    impl->close_all();
    impl->io.stop();
  });
  impl_->thread.join();
}

std::uint16_t TcpProxy::port() const { return impl_->acceptor.local_endpoint().port(); }

void TcpProxy::cut() {
  impl_->blocked = true;
  std::promise<void> done;
  asio::post(impl_->io, [impl = impl_, &done] {
    impl->close_all();
    done.set_value();
  });
  done.get_future().wait();
}

void TcpProxy::heal() { impl_->blocked = false; }

std::uint64_t TcpProxy::connections() const { return impl_->forwarded; }

}  // namespace kinformer::e2e
