// The Transport itself: the synchronous bridge between callers' threads and its runtime's
// threads. Each request() or watch() is spawned as a coroutine on the transport's strand and the
// caller waits for its result; the pieces it runs live apart: server_url (the URL), tls (contexts
// and verification), connection (connections and the keep-alive pool), watch_stream (streaming
// responses).
#include "transport.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

#include <cassert>
#include <condition_variable>
#include <future>
#include <mutex>
#include <optional>
#include <thread>

#include "connection.h"
#include "http2/session.h"
#include "io_runtime_impl.h"
#include "net.h"
#include "server_url.h"
#include "tls.h"
#include "watch_stream.h"

namespace kinformer::client::detail {
namespace {

TlsSettings tls_settings(const ClusterConfig& config, const ServerUrl& url) {
  TlsSettings s;
  s.enabled = url.tls;
  s.ca_pem = config.ca_pem;
  s.insecure_skip_tls_verify = config.insecure_skip_tls_verify;
  s.verify_name = config.tls_server_name.empty() ? url.host : config.tls_server_name;
  s.verify_is_ip = is_ip(s.verify_name);
  return s;
}

Http2SessionOptions http2_options(const TransportOptions& options, const ServerUrl& url) {
  Http2SessionOptions o;
  o.idle_timeout = options.idle_connection_timeout;
  if (options.http2_read_idle_timeout.count() > 0) o.ping_after = options.http2_read_idle_timeout;
  if (options.http2_ping_timeout.count() > 0) o.ping_timeout = options.http2_ping_timeout;
  o.server = url.host + ":" + url.port;
  return o;
}

}  // namespace

struct Transport::Impl {
  Impl(const ClusterConfig& config, TransportOptions transport_options)
      : runtime(transport_options.runtime ? transport_options.runtime
                                          : std::make_shared<IoRuntime>(1)),
        strand(asio::make_strand(runtime->impl().ioc)),
        options(std::move(transport_options)),
        url(parse_server(config.server)),
        host_header(url.host_header()),
        tls(tls_settings(config, url)),
        connector(url, tls.settings()),
        pool(connector, options.max_idle_connections, options.idle_connection_timeout,
             options.clock ? options.clock : system_clock(), options.max_response_bytes),
        h2(connector, http2_options(options, url), [this] { return running_token(); }) {}

  // First: outlives everything below that uses its executor.
  const IoRuntimePtr runtime;
  // Everything of this transport (pool, connector, coroutines, watch state) runs here: one
  // handler at a time, whichever runtime thread runs it.
  const asio::strand<asio::io_context::executor_type> strand;
  const TransportOptions options;
  const ServerUrl url;
  const std::string host_header;
  TlsContexts tls;
  Connector connector;  // strand only
  ConnectionPool pool;  // strand only
  Http2Pool h2;         // strand only: watches' shared connections

  // Coroutines of this transport not finished yet: the destructor waits for none (they use the
  // transport by a plain pointer).
  std::mutex running_mu;
  std::condition_variable running_cv;
  std::size_t running = 0;  // guarded by running_mu

  // A token for one coroutine, captured by it: counted while the coroutine's frame lives.
  std::shared_ptr<void> running_token() {
    {
      std::lock_guard lock(running_mu);
      ++running;
    }
    return {nullptr, [this](void*) {
              std::lock_guard lock(running_mu);
              if (--running == 0) running_cv.notify_all();
            }};
  }

  // Runs `fn` on the strand and waits for it (never from the runtime's own threads).
  template <typename Fn>
  void run_on_strand(Fn fn) {
    std::promise<void> done;
    asio::post(strand, [&] {
      fn();
      done.set_value();
    });
    done.get_future().wait();
  }

  // `gzip`: say Accept-Encoding: gzip (never on a watch: the API server does not compress
  // watch streams, and a compressed stream could not be decoded event by event as it comes).
  http::request<http::string_body> build(const HttpRequest& request, const Credentials& credentials,
                                         bool gzip) const {
    http::request<http::string_body> req;
    req.method_string(request.method);
    req.target(url.prefix + request.target);
    req.version(11);
    req.set(http::field::host, host_header);
    req.set(http::field::user_agent, options.user_agent);
    if (!request.accept.empty()) req.set(http::field::accept, request.accept);
    if (gzip) req.set(http::field::accept_encoding, "gzip");
    if (!credentials.token.empty()) {
      req.set(http::field::authorization, "Bearer " + credentials.token);
    }
    if (!request.body.empty() || request.method == "POST" || request.method == "PUT" ||
        request.method == "PATCH") {
      if (!request.content_type.empty()) req.set(http::field::content_type, request.content_type);
      req.body() = request.body;
    }
    req.keep_alive(true);
    req.prepare_payload();
    return req;
  }
};

std::shared_ptr<Transport> Transport::create(const ClusterConfig& config,
                                             TransportOptions options) {
  std::shared_ptr<Transport> t(new Transport());
  t->impl_ = std::make_unique<Impl>(config, std::move(options));
  Impl& impl = *t->impl_;
  if (impl.url.tls && !config.insecure_skip_tls_verify && !config.ca_pem.empty()) {
    auto probe = impl.tls.make_context({});
    if (!probe) throw ConfigError("server " + config.server + ": " + probe.error().message);
  }
  return t;
}

// NOLINTNEXTLINE(bugprone-exception-escape): only bad_alloc can escape: terminate
Transport::~Transport() {
  if (!impl_) return;
  // Never on the runtime's threads (coroutines hold Impl by a plain pointer; watch streams let
  // go of the Transport on their owner's thread); debug builds check that it stays so.
  assert(!impl_->runtime->running_in_this_thread());
  // Every watch stream is gone (each holds the transport) and has asked its coroutine to stop;
  // no request is in flight (request() waits for its answer). So: close the idle connections,
  // wait for the coroutines still winding down (a cancelled read returns at once), then let
  // the strand run what they posted before they ended. Completions still on their way (a
  // cancelled timer's, a late name resolution's) hold only the watch state or the resolution's
  // own state, never Impl: that is the rule that keeps them harmless after this returns.
  impl_->run_on_strand([impl = impl_.get()] {
    impl->pool.close_all();
    impl->h2.close_all(Error::make(Errc::cancelled, "client is shutting down"));
  });
  {
    std::unique_lock lock(impl_->running_mu);
    impl_->running_cv.wait(lock, [&] { return impl_->running == 0; });
  }
  impl_->run_on_strand([] {});
}

Result<HttpResponse> Transport::request(const HttpRequest& request,
                                        const Credentials& credentials) {
  return this->request(request, credentials, nullptr);
}

Result<HttpResponse> Transport::request(const HttpRequest& request, const Credentials& credentials,
                                        const BodySink* sink) {
  if (impl_->runtime->running_in_this_thread()) {
    return Error::make(Errc::network, "RestClient called from its own io thread");
  }
  std::size_t cert_id = 0;
  auto context = impl_->tls.context_for(credentials, cert_id);
  if (!context) return std::move(context).error();
  auto deadline = std::chrono::steady_clock::now() + impl_->options.request_timeout;
  auto promise = std::make_shared<std::promise<Result<HttpResponse>>>();
  auto future = promise->get_future();
  asio::co_spawn(
      impl_->strand,
      [impl = impl_.get(), token = impl_->running_token(), promise,
       req = impl_->build(request, credentials,
                          impl_->options.accept_gzip && request.method == "GET"),
       ctx = context.value(), cert_id, deadline, sink]() mutable -> awaitable<void> {
        try {
          promise->set_value(
              co_await impl->pool.request(std::move(req), std::move(ctx), cert_id, deadline, sink));
        } catch (const std::exception& e) {
          promise->set_value(
              Error::make(Errc::network, std::string("internal error: ") + e.what()));
        }
      },
      asio::detached);
  try {
    return future.get();
  } catch (const std::future_error&) {
    return Error::make(Errc::cancelled, "client is shutting down");
  }
}

Result<WatchStreamPtr> Transport::watch(
    const HttpRequest& request, const Credentials& credentials, std::shared_ptr<const Codec> codec,
    const std::function<void(const HttpResponse&)>& on_headers) {
  using Phase = WatchState::Phase;
  if (impl_->runtime->running_in_this_thread()) {
    return Error::make(Errc::network, "RestClient called from its own io thread");
  }
  std::size_t cert_id = 0;
  auto context = impl_->tls.context_for(credentials, cert_id);
  if (!context) return std::move(context).error();
  auto deadline = std::chrono::steady_clock::now() + impl_->options.request_timeout;
  auto st = std::make_shared<WatchState>();
  st->ex = impl_->strand;
  st->limit = std::max<std::size_t>(impl_->options.watch_queue_limit, 2);
  st->bytes_limit = std::max<std::size_t>(impl_->options.watch_queue_bytes_limit, 2);
  asio::co_spawn(
      impl_->strand,
      [impl = impl_.get(), token = impl_->running_token(), st,
       req = impl_->build(request, credentials, false), ctx = context.value(), cert_id, deadline,
       codec = std::move(codec), idle = request.idle_timeout]() mutable -> awaitable<void> {
        try {
          Http2Pool* h2 = impl->options.http2 ? &impl->h2 : nullptr;
          co_await run_watch(st, impl->connector, h2, impl->options, std::move(req), std::move(ctx),
                             cert_id, deadline, std::move(codec), idle);
        } catch (const std::exception& e) {
          std::unique_lock lock(st->mu);
          Error err = Error::make(Errc::network, std::string("internal error: ") + e.what());
          if (st->phase == Phase::opening) {
            st->phase = Phase::open_failed;
            st->error = err;
          } else if (st->phase != Phase::cancelled) {
            st->phase = Phase::failed;
            st->error = err;
          }
          st->notify_reader(lock);
        }
      },
      asio::detached);
  HttpResponse head;
  std::optional<Error> open_error;
  {
    std::unique_lock lock(st->mu);
    st->cv.wait(lock, [&] { return st->phase != Phase::opening; });
    head = std::move(st->head);  // the reader's now: a long watch need not keep it
    if (st->phase == Phase::open_failed) open_error = st->error;
  }
  // The stream first: should on_headers throw (a user's warning handler), destroying it cancels
  // the watch, which would otherwise read on for ever and hold up the transport's destruction.
  auto stream = std::make_unique<WatchStreamImpl>(shared_from_this(), st);
  if (on_headers && head.status != 0) on_headers(head);
  if (open_error) return *open_error;
  return WatchStreamPtr(std::move(stream));
}

std::size_t Transport::http2_connections() {
  std::size_t n = 0;
  impl_->run_on_strand([&] { n = impl_->h2.sessions(); });
  return n;
}

}  // namespace kinformer::client::detail
