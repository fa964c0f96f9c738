// IoRuntime: clients sharing one runtime share its threads, each client's I/O stays its own, a
// call from a runtime thread is refused, and a client goes away cleanly while its watch winds
// down on the shared threads.
#include "kinformer/client/io_runtime.h"

#include <gtest/gtest.h>

#include <boost/asio/post.hpp>

#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "fake_apiserver.h"
#include "io_runtime_impl.h"
#include "kinformer/client/dynamic_object.h"
#include "kinformer/client/rest_client.h"
#include "process_threads.h"
#include "test_resources.h"

namespace kinformer::client {
namespace {

using namespace std::chrono_literals;
using kinformer::testing::FakeApiServer;
using kinformer::testing::Reply;
using kinformer::testing::Request;
using kinformer::testing::ScriptedStream;
using kinformer::testing::watch_event_line;

RestClientOptions on(const IoRuntimePtr& runtime) {
  RestClientOptions o;
  o.rate_limit.qps = 0;
  o.request_timeout = 5s;
  o.runtime = runtime;
  return o;
}

// Twenty clients on a runtime of one thread: every request answered, and the process holds the
// runtime's thread (plus Asio's one resolver thread), not one thread per client. Mutant
// client-runtime-ignored.
TEST(IoRuntimeTest, ClientsOnOneRuntimeShareItsThreads) {
  FakeApiServer server;
  server.on("GET", "/readyz", [](const Request&) { return Reply::text("ok"); });
  auto runtime = std::make_shared<IoRuntime>(1);
  EXPECT_EQ(runtime->threads(), 1u);
  const std::size_t before = testing::process_threads();
  std::vector<std::unique_ptr<RestClient>> clients;
  for (int i = 0; i < 20; ++i) {
    clients.push_back(std::make_unique<RestClient>(server.cluster_config(), on(runtime)));
  }
  for (auto& c : clients) {
    auto r = c->get_raw("/readyz");
    ASSERT_TRUE(r) << r.error().to_string();
    EXPECT_EQ(r->status, 200);
  }
  EXPECT_LE(testing::process_threads(), before + 1);
}

// Two clients' watches on one thread both deliver; one client going away while its watch is
// open (the stream closed first, its read winding down on the shared thread) leaves the other
// working. ASan/TSan runs check the teardown.
TEST(IoRuntimeTest, AClientLeavesWhileItsWatchWindsDownAndTheOtherGoesOn) {
  FakeApiServer server;
  auto s1 = std::make_shared<ScriptedStream>();
  auto s2 = std::make_shared<ScriptedStream>();
  server.on("GET", "/api/v1/pods", [s1, s2](const Request& r) {
    return Reply::streaming(r.header("user-agent") == "one" ? s1 : s2);
  });
  auto runtime = std::make_shared<IoRuntime>(1);
  RestClientOptions o1 = on(runtime), o2 = on(runtime);
  o1.user_agent = "one";
  o2.user_agent = "two";
  auto one = std::make_unique<RestClient>(server.cluster_config(), o1);
  RestClient two(server.cluster_config(), o2);
  auto w1 = one->watch(kPods, "", {});
  auto w2 = two.watch(kPods, "", {});
  ASSERT_TRUE(w1 && w2);
  s1->send(watch_event_line("ADDED", minimal_pod_json("a", "1")));
  s2->send(watch_event_line("ADDED", minimal_pod_json("b", "2")));
  auto e1 = (*w1)->next();
  auto e2 = (*w2)->next();
  ASSERT_TRUE(e1 && e1->has_value() && e2 && e2->has_value());
  EXPECT_EQ((*e1)->object->metadata.name, "a");
  EXPECT_EQ((*e2)->object->metadata.name, "b");
  w1 = Error::make(Errc::cancelled, "closed");  // the stream goes first, then its client
  one.reset();
  s2->send(watch_event_line("MODIFIED", minimal_pod_json("b", "3")));
  auto e3 = (*w2)->next();
  ASSERT_TRUE(e3 && e3->has_value());
  EXPECT_EQ((*e3)->object->metadata.resource_version, "3");
}

// A watch whose opening calls a warning handler that throws: the exception reaches the caller,
// the watch is cancelled, and the client goes away (its destruction waits for no watch that
// nobody can cancel any more). Mutant client-watch-headers-before-stream.
TEST(IoRuntimeTest, AWatchWhoseWarningHandlerThrowsIsCancelledAndTheClientGoesAway) {
  FakeApiServer server;
  auto stream = std::make_shared<ScriptedStream>();
  server.on("GET", "/api/v1/pods", [stream](const Request&) {
    Reply r = Reply::streaming(stream);
    r.headers.emplace_back("Warning", R"(299 - "v1 Pods are going away")");
    return r;
  });
  RestClientOptions o = on(std::make_shared<IoRuntime>(1));
  o.on_warning = [](const ApiWarning&) { throw std::runtime_error("the warning handler failed"); };
  auto client = std::make_unique<RestClient>(server.cluster_config(), o);
  EXPECT_THROW((void)client->watch(kPods, "", {}), std::runtime_error);
  EXPECT_TRUE(stream->wait_client_closed(5s)) << "the watch was cancelled";
  auto gone = std::async(std::launch::async, [&] { client.reset(); });
  EXPECT_EQ(gone.wait_for(10s), std::future_status::ready);
}

// A reader told when the stream is ready (notify_when_ready) needs no thread while it is quiet:
// the wake comes once an event is queued (from the io thread), at once when one is queued
// already, when the stream ends, and when it is cancelled; next() then does not block.
// Mutant client-watch-ready-never-woken.
TEST(IoRuntimeTest, AWatchSaysWhenItIsReady) {
  FakeApiServer server;
  std::vector<std::shared_ptr<ScriptedStream>> streams;
  std::mutex mu;
  server.on("GET", "/api/v1/pods", [&](const Request&) {
    auto s = std::make_shared<ScriptedStream>();
    std::lock_guard lock(mu);
    streams.push_back(s);
    return Reply::streaming(s);
  });
  RestClient client(server.cluster_config(), on(std::make_shared<IoRuntime>(1)));
  auto w = client.watch(kPods, "", {});
  ASSERT_TRUE(w) << w.error().to_string();
  WatchStream& stream = **w;
  std::shared_ptr<ScriptedStream> s1;
  {
    std::lock_guard lock(mu);
    s1 = streams.at(0);
  }
  // Quiet: asked, not woken.
  auto woken = std::make_shared<std::promise<std::thread::id>>();
  ASSERT_TRUE(stream.notify_when_ready([woken] { woken->set_value(std::this_thread::get_id()); }));
  auto when = woken->get_future();
  EXPECT_EQ(when.wait_for(50ms), std::future_status::timeout);
  s1->send(watch_event_line("ADDED", minimal_pod_json("a", "1")));
  ASSERT_EQ(when.wait_for(10s), std::future_status::ready);
  EXPECT_NE(when.get(), std::this_thread::get_id()) << "woken by the io thread";
  EXPECT_GE(stream.buffered(), 1u);
  auto e1 = stream.next();
  ASSERT_TRUE(e1 && e1->has_value());
  EXPECT_EQ((*e1)->object->metadata.name, "a");
  // Queued already: woken at once, on this thread, before notify_when_ready() returns.
  s1->send(watch_event_line("ADDED", minimal_pod_json("b", "2")));
  auto arrived = std::make_shared<std::promise<void>>();
  ASSERT_TRUE(stream.notify_when_ready([arrived] { arrived->set_value(); }));
  ASSERT_EQ(arrived->get_future().wait_for(10s), std::future_status::ready);
  bool at_once = false;
  ASSERT_TRUE(stream.notify_when_ready([&at_once] { at_once = true; }));
  EXPECT_TRUE(at_once);
  auto e2 = stream.next();
  ASSERT_TRUE(e2 && e2->has_value());
  EXPECT_EQ((*e2)->object->metadata.name, "b");
  // The end of the stream wakes the reader, and next() says so.
  auto ended = std::make_shared<std::promise<void>>();
  ASSERT_TRUE(stream.notify_when_ready([ended] { ended->set_value(); }));
  s1->end();
  ASSERT_EQ(ended->get_future().wait_for(10s), std::future_status::ready);
  auto end = stream.next();
  ASSERT_TRUE(end) << end.error().to_string();
  EXPECT_FALSE(end->has_value());
  // A cancel wakes a reader of a quiet stream.
  auto w2 = client.watch(kPods, "", {});
  ASSERT_TRUE(w2) << w2.error().to_string();
  auto cancelled = std::make_shared<std::promise<void>>();
  ASSERT_TRUE((*w2)->notify_when_ready([cancelled] { cancelled->set_value(); }));
  std::thread([&] { (*w2)->cancel(); }).join();
  ASSERT_EQ(cancelled->get_future().wait_for(10s), std::future_status::ready);
  auto c = (*w2)->next();
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, Errc::cancelled);
}

// A blocking call from one of the runtime's threads would wait for itself: refused.
TEST(IoRuntimeTest, ACallFromARuntimeThreadIsRefused) {
  FakeApiServer server;
  server.on("GET", "/readyz", [](const Request&) { return Reply::text("ok"); });
  auto runtime = std::make_shared<IoRuntime>(2);
  RestClient client(server.cluster_config(), on(runtime));
  std::promise<Result<RawResponse>> answer;
  boost::asio::post(runtime->impl().ioc, [&] {
    EXPECT_TRUE(runtime->running_in_this_thread());
    answer.set_value(client.get_raw("/readyz"));
  });
  auto r = answer.get_future().get();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::network);
  EXPECT_FALSE(runtime->running_in_this_thread());
  EXPECT_TRUE(client.get_raw("/readyz")) << "from any other thread it works";
}

}  // namespace
}  // namespace kinformer::client
