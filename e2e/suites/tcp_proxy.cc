#include "tcp_proxy.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <future>
#include <optional>
#include <random>
#include <thread>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

namespace kinformer::e2e {

namespace asio = boost::asio;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

const char* to_string(Fault fault) {
  switch (fault) {
    case Fault::cut:
      return "cut";
    case Fault::stall:
      return "stall";
    case Fault::silent:
      return "silent";
    case Fault::truncate:
      return "truncate";
    case Fault::delay:
      return "delay";
    case Fault::reset:
      return "reset";
  }
  return "?";
}

namespace {

constexpr auto kAwait = asio::as_tuple(asio::use_awaitable);

// One forwarded connection: the client's socket, ours to the server, and the faults applied to
// it. Owned by its two pumps (one per direction); io thread only.
struct Connection {
  Connection(tcp::socket client_socket, std::uint64_t connection_id)
      : id(connection_id),
        client(std::move(client_socket)),
        server(client.get_executor()),
        timers{asio::steady_timer(client.get_executor()),
               asio::steady_timer(client.get_executor())} {}

  const std::uint64_t id;
  tcp::socket client;
  tcp::socket server;
  // One per pump (0: client->server, 1: server->client), for stall and delay waits; cancelled to
  // end a wait early. One each, because re-arming a shared timer would cancel the other's wait.
  std::array<asio::steady_timer, 2> timers;
  Clock::time_point stalled_until{};
  Clock::time_point delayed_until{};
  Clock::duration delay{};
  std::optional<std::size_t> truncate_after;  // server->client bytes still forwarded
  bool silent = false;                        // for good: clear_faults() leaves it
  bool closed = false;
  std::array<std::uint64_t, 2> bytes{};  // forwarded, per pump
  Clock::time_point opened = Clock::now();
  Clock::time_point last_byte = opened;

  // rst: the client gets a reset instead of an orderly FIN.
  void close(bool rst) {
    if (closed) return;
    closed = true;
    boost::system::error_code ignored;
    if (rst) client.set_option(tcp::socket::linger(true, 0), ignored);
    client.close(ignored);
    server.close(ignored);
    clear_faults();
  }
  void clear_faults() {
    stalled_until = {};
    delayed_until = {};
    truncate_after.reset();
    for (auto& t : timers) t.cancel();
  }
};

// A running schedule; io thread only. Its coroutine holds it, so stopping is: set `stopped`,
// cancel the timer.
struct Schedule {
  Schedule(asio::io_context& io, FaultSchedule p)
      : params(std::move(p)), rng(params.seed), timer(io), started(Clock::now()) {}
  FaultSchedule params;
  std::mt19937_64 rng;
  asio::steady_timer timer;
  Clock::time_point started;
  bool stopped = false;

  milliseconds draw(milliseconds lo, milliseconds hi) {
    return milliseconds(
        std::uniform_int_distribution<long long>(lo.count(), std::max(lo, hi).count())(rng));
  }
  std::size_t draw(std::size_t lo, std::size_t hi) {
    return std::uniform_int_distribution<std::size_t>(lo, std::max(lo, hi))(rng);
  }
};

}  // namespace

struct TcpProxy::Impl {
  asio::io_context io;
  tcp::acceptor acceptor{io};
  tcp::endpoint upstream;
  std::atomic<bool> blocked{false};  // cut() .. heal()
  std::atomic<std::uint64_t> forwarded{0};
  std::array<std::atomic<std::uint64_t>, kAllFaults.size()> fault_counts{};
  // The rest is touched only on the io thread.
  Clock::time_point cut_until{};  // a scheduled cut
  std::uint64_t next_id = 0;
  std::vector<std::weak_ptr<Connection>> live;
  std::shared_ptr<Schedule> schedule;
  std::thread thread;

  bool refusing() const { return blocked || Clock::now() < cut_until; }

  std::vector<std::shared_ptr<Connection>> open_connections() {
    std::vector<std::shared_ptr<Connection>> out;
    std::erase_if(live, [&](const std::weak_ptr<Connection>& weak) {
      auto c = weak.lock();
      if (!c || c->closed) return true;
      out.push_back(std::move(c));
      return false;
    });
    return out;
  }

  // Waits on the pump's timer while the connection is stalled, then for the added latency.
  static asio::awaitable<void> hold(Connection& c, asio::steady_timer& timer) {
    while (!c.closed && Clock::now() < c.stalled_until) {
      timer.expires_at(c.stalled_until);
      co_await timer.async_wait(kAwait);  // cancelled: re-check (stop_faults clears the stall)
    }
    if (!c.closed && Clock::now() < c.delayed_until) {
      timer.expires_after(c.delay);
      co_await timer.async_wait(kAwait);
    }
  }

  static asio::awaitable<void> pump(std::shared_ptr<Connection> c, bool downstream) {
    tcp::socket& from = downstream ? c->server : c->client;
    tcp::socket& to = downstream ? c->client : c->server;
    asio::steady_timer& timer = c->timers[downstream ? 1 : 0];
    std::array<char, 16384> buf;
    while (!c->closed) {
      auto [ec, n] = co_await from.async_read_some(asio::buffer(buf), kAwait);
      if (ec) break;
      // Silent: what arrives is dropped, and reading goes on, so that either side's FIN or RST
      // still ends the connection (the client giving up on it, or the server's idle timeout).
      if (c->silent) continue;
      co_await hold(*c, timer);
      if (c->closed) break;
      std::size_t forward = n;
      bool truncated = false;
      if (downstream && c->truncate_after) {
        forward = std::min(n, *c->truncate_after);
        *c->truncate_after -= forward;
        truncated = *c->truncate_after == 0;
      }
      auto [wec, wn] = co_await asio::async_write(to, asio::buffer(buf.data(), forward), kAwait);
      c->bytes[downstream ? 1 : 0] += wn;
      c->last_byte = Clock::now();
      if (wec || truncated) break;
    }
    c->close(false);
  }

  asio::awaitable<void> serve(tcp::socket client) {
    auto c = std::make_shared<Connection>(std::move(client), ++next_id);
    if (refusing()) {
      c->close(false);
      co_return;
    }
    auto [ec] = co_await c->server.async_connect(upstream, kAwait);
    if (ec || refusing()) {
      c->close(false);
      co_return;
    }
    ++forwarded;
    live.push_back(c);
    asio::co_spawn(io, pump(c, false), asio::detached);
    asio::co_spawn(io, pump(c, true), asio::detached);
  }

  asio::awaitable<void> accept_loop() {
    while (true) {
      tcp::socket socket(io);
      auto [ec] = co_await acceptor.async_accept(socket, kAwait);
      if (ec) co_return;
      asio::co_spawn(io, serve(std::move(socket)), asio::detached);
    }
  }

  void close_all() {
    for (auto& c : open_connections()) c->close(false);
    live.clear();
  }

  asio::awaitable<void> run_schedule(std::shared_ptr<Schedule> s) {
    auto& p = s->params;
    while (!s->stopped) {
      s->timer.expires_after(s->draw(p.min_gap, p.max_gap));
      co_await s->timer.async_wait(kAwait);
      if (s->stopped || p.kinds.empty()) continue;
      const Fault kind = p.kinds[s->draw(std::size_t{0}, p.kinds.size() - 1)];
      inject(*s, kind);
    }
  }

  // Draws the fault's parameters and the connection it hits (always the same draws for a kind,
  // so the random sequence does not depend on how many connections are open), then applies it.
  void inject(Schedule& s, Fault kind) {
    auto& p = s.params;
    milliseconds duration{0}, latency{0};
    std::size_t bytes = 0;
    switch (kind) {
      case Fault::cut:
        duration = s.draw(p.min_cut, p.max_cut);
        break;
      case Fault::stall:
        duration = s.draw(p.min_stall, p.max_stall);
        break;
      case Fault::truncate:
        bytes = s.draw(p.min_truncate_bytes, p.max_truncate_bytes);
        break;
      case Fault::delay:
        latency = s.draw(p.min_delay, p.max_delay);
        duration = s.draw(p.min_delay_for, p.max_delay_for);
        break;
      case Fault::reset:
      case Fault::silent:
        break;
    }
    const std::uint64_t pick = s.rng();
    const auto now = Clock::now();
    char line[160];
    const double at = std::chrono::duration<double>(now - s.started).count();

    if (kind == Fault::cut) {
      const std::size_t open = open_connections().size();
      cut_until = now + duration;
      close_all();
      std::snprintf(line, sizeof line, "t=%.1fs fault=cut for_ms=%lld closed=%zu", at,
                    static_cast<long long>(duration.count()), open);
    } else {
      auto open = open_connections();
      if (open.empty()) return;  // nothing to hit: not injected
      Connection& c = *open[pick % open.size()];
      switch (kind) {
        case Fault::stall:
          c.stalled_until = now + duration;
          std::snprintf(line, sizeof line, "t=%.1fs fault=stall conn=%llu for_ms=%lld", at,
                        static_cast<unsigned long long>(c.id),
                        static_cast<long long>(duration.count()));
          break;
        case Fault::truncate:
          c.truncate_after = bytes;
          std::snprintf(line, sizeof line, "t=%.1fs fault=truncate conn=%llu after_bytes=%zu", at,
                        static_cast<unsigned long long>(c.id), bytes);
          break;
        case Fault::delay:
          c.delay = latency;
          c.delayed_until = now + duration;
          std::snprintf(
              line, sizeof line, "t=%.1fs fault=delay conn=%llu latency_ms=%lld for_ms=%lld", at,
              static_cast<unsigned long long>(c.id), static_cast<long long>(latency.count()),
              static_cast<long long>(duration.count()));
          break;
        case Fault::silent:
          c.silent = true;
          std::snprintf(line, sizeof line, "t=%.1fs fault=silent conn=%llu", at,
                        static_cast<unsigned long long>(c.id));
          break;
        default:
          c.close(true);
          std::snprintf(line, sizeof line, "t=%.1fs fault=reset conn=%llu", at,
                        static_cast<unsigned long long>(c.id));
          break;
      }
    }
    ++fault_counts[static_cast<std::size_t>(kind)];
    if (p.log) p.log(line);
  }

  // io thread.
  void end_schedule() {
    if (schedule) {
      schedule->stopped = true;
      schedule->timer.cancel();
      schedule.reset();
    }
    cut_until = {};
    for (auto& c : open_connections()) c->clear_faults();
  }

  // Runs fn on the io thread and waits for it.
  template <typename Fn>
  void run(Fn fn) {
    std::promise<void> done;
    asio::post(io, [&] {
      fn();
      done.set_value();
    });
    done.get_future().wait();
  }
};

namespace {

// "https://host:port" -> (host, port).
std::pair<std::string, std::uint16_t> host_port(const std::string& url) {
  const auto host_start = url.find("://") + 3;
  const auto colon = url.rfind(':');
  return {url.substr(host_start, colon - host_start),
          static_cast<std::uint16_t>(std::stoi(url.substr(colon + 1)))};
}

}  // namespace

TcpProxy::TcpProxy(const std::string& server_url)
    : TcpProxy(host_port(server_url).first, host_port(server_url).second) {}

std::string TcpProxy::url() const { return "https://127.0.0.1:" + std::to_string(port()); }

TcpProxy::TcpProxy(std::string upstream_host, std::uint16_t upstream_port)
    : upstream_host_(std::move(upstream_host)), impl_(std::make_shared<Impl>()) {
  impl_->upstream = tcp::endpoint(asio::ip::make_address(upstream_host_), upstream_port);
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
    impl->end_schedule();
    impl->acceptor.close(ignored);
    impl->close_all();
    impl->io.stop();
  });
  impl_->thread.join();
}

std::uint16_t TcpProxy::port() const { return impl_->acceptor.local_endpoint().port(); }

void TcpProxy::cut() {
  impl_->blocked = true;
  impl_->run([impl = impl_.get()] { impl->close_all(); });
}

void TcpProxy::heal() {
  impl_->blocked = false;
  impl_->run([impl = impl_.get()] { impl->cut_until = {}; });
}

std::size_t TcpProxy::silence() {
  std::size_t n = 0;
  impl_->run([impl = impl_.get(), &n] {
    for (auto& c : impl->open_connections()) {
      c->silent = true;
      ++n;
    }
  });
  return n;
}

std::uint64_t TcpProxy::connections() const { return impl_->forwarded; }

void TcpProxy::start_faults(FaultSchedule schedule) {
  impl_->run([impl = impl_.get(), &schedule] {
    impl->end_schedule();  // precondition says none runs; never two at once
    impl->schedule = std::make_shared<Schedule>(impl->io, std::move(schedule));
    asio::co_spawn(impl->io, impl->run_schedule(impl->schedule), asio::detached);
  });
}

void TcpProxy::stop_faults() {
  impl_->run([impl = impl_.get()] { impl->end_schedule(); });
}

std::uint64_t TcpProxy::faults(Fault kind) const {
  return impl_->fault_counts[static_cast<std::size_t>(kind)];
}

std::vector<std::string> TcpProxy::describe_connections() const {
  std::vector<std::string> out;
  impl_->run([&, impl = impl_.get()] {
    const auto now = Clock::now();
    auto ms = [](Clock::duration d) {
      return static_cast<long long>(std::chrono::duration_cast<milliseconds>(d).count());
    };
    for (const auto& c : impl->open_connections()) {
      char line[200];
      std::snprintf(line, sizeof line,
                    "conn=%llu age_ms=%lld up_bytes=%llu down_bytes=%llu idle_ms=%lld%s%s%s%s",
                    static_cast<unsigned long long>(c->id), ms(now - c->opened),
                    static_cast<unsigned long long>(c->bytes[0]),
                    static_cast<unsigned long long>(c->bytes[1]), ms(now - c->last_byte),
                    now < c->stalled_until ? " stalled" : "",
                    now < c->delayed_until ? " delayed" : "", c->silent ? " silent" : "",
                    c->truncate_after ? " truncating" : "");
      out.emplace_back(line);
    }
  });
  return out;
}

std::uint64_t TcpProxy::faults_total() const {
  std::uint64_t total = 0;
  for (const auto& n : impl_->fault_counts) total += n;
  return total;
}

}  // namespace kinformer::e2e
