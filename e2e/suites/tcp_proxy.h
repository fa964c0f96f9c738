#pragma once
// TcpProxy: a loopback TCP forwarder between a client under test and a real API server, so a
// test can break the client's connections while the server keeps running for everyone else.
// TLS passes through untouched: every fault is one the client sees on its TCP connection (a
// refused or closed connection, silence, latency, a short read in the middle of a TLS record,
// a reset).
//
// Two ways to break things:
// - cut() / heal(): every connection closed and new ones refused, until heal().
// - silence(): every open connection held open and silent for good; new ones forwarded.
// - A seeded fault schedule (start_faults / stop_faults): at random gaps, one fault at a time,
//   drawn from a std::mt19937_64 seeded with FaultSchedule::seed, so a printed seed names the
//   sequence of fault kinds, gaps and parameters (which connection a fault hits depends on the
//   connections open at that moment, so a rerun is similar, not identical).
//
// Threading contract: every public member may be called from any thread. Connection state and
// the schedule live on the proxy's one io thread; public calls that change them post to that
// thread and wait for the change to be made (cut(), stop_faults()), so when they return, the
// change is in effect. Fault counts are atomics. Lifetime: the destructor ends the schedule,
// closes every connection and joins the io thread.

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace kinformer::e2e {

/// What the fault schedule can do.
enum class Fault {
  cut,       ///< every connection closed, new ones refused, for a while (then healed)
  stall,     ///< one connection stops forwarding both ways for a while, then resumes
  truncate,  ///< one connection forwards a few more server->client bytes, then closes
  delay,     ///< one connection waits before forwarding each chunk, for a while
  reset,     ///< one connection closed with an RST (SO_LINGER 0) towards the client
  /// One connection stops forwarding both ways for good, held open (no FIN, no RST): a dead NAT
  /// entry or a wedged proxy. Bytes that arrive are dropped; a side closing its end closes it;
  /// stop_faults() does not undo it.
  silent,
};
inline constexpr std::array<Fault, 6> kAllFaults = {Fault::cut,   Fault::stall, Fault::truncate,
                                                    Fault::delay, Fault::reset, Fault::silent};
/// "cut", "stall", ...
const char* to_string(Fault fault);

/// The parameters of a fault schedule. Each draw is uniform in its range.
struct FaultSchedule {
  std::uint64_t seed = 0;
  /// The kinds drawn from (uniformly); empty: none (the schedule only waits).
  std::vector<Fault> kinds{kAllFaults.begin(), kAllFaults.end()};
  /// Time between two faults.
  std::chrono::milliseconds min_gap{300};
  std::chrono::milliseconds max_gap{2500};
  /// How long a cut lasts.
  std::chrono::milliseconds min_cut{100};
  std::chrono::milliseconds max_cut{3000};
  /// How long a stall lasts (keep it below the client's watch idle timeout to test resumption,
  /// or above it to test the timeout).
  std::chrono::milliseconds min_stall{200};
  std::chrono::milliseconds max_stall{6000};
  /// Server->client bytes still forwarded before a truncated connection closes: a few bytes
  /// into the next TLS record, i.e. in the middle of a watch event.
  std::size_t min_truncate_bytes = 1;
  std::size_t max_truncate_bytes = 4096;
  /// Latency added to every chunk of a delayed connection, and for how long.
  std::chrono::milliseconds min_delay{5};
  std::chrono::milliseconds max_delay{250};
  std::chrono::milliseconds min_delay_for{500};
  std::chrono::milliseconds max_delay_for{8000};
  /// Called on the io thread with one line per fault injected (kind, connection, parameters).
  /// Keep it quick. Never sees payload bytes.
  std::function<void(const std::string&)> log;
};

/// See the file comment for the threading contract.
class TcpProxy {
 public:
  /// Forwards 127.0.0.1:<port()> to upstream_host:upstream_port.
  TcpProxy(std::string upstream_host, std::uint16_t upstream_port);
  /// Forwards to the host and port of `server_url` ("https://127.0.0.1:6443").
  explicit TcpProxy(const std::string& server_url);
  ~TcpProxy();
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  [[nodiscard]] std::uint16_t port() const;
  /// "https://127.0.0.1:<port()>".
  [[nodiscard]] std::string url() const;
  /// The upstream's host (for TLS: the name its certificate is checked against).
  [[nodiscard]] const std::string& upstream_host() const noexcept { return upstream_host_; }
  /// Closes every open connection and refuses new ones (accepted, then closed at once).
  void cut();
  /// Forwards new connections again (also ends a cut made by the schedule).
  void heal();
  /// Every connection open now goes silent for good (Fault::silent); new ones forward as usual.
  /// Returns how many went silent.
  std::size_t silence();
  /// Connections forwarded so far.
  [[nodiscard]] std::uint64_t connections() const;

  /// Starts injecting faults by `schedule`. Precondition: no schedule is running.
  void start_faults(FaultSchedule schedule);
  /// Ends the schedule and undoes its lasting faults: a scheduled cut is healed, stalled
  /// connections resume, added latency and pending truncations are dropped. Connections already
  /// closed stay closed, silent ones silent (the client has to find them). Idempotent; returns
  /// once the schedule has stopped.
  void stop_faults();
  /// Faults the schedule injected, by kind (a per-connection fault drawn while no connection was
  /// open is not injected and not counted).
  [[nodiscard]] std::uint64_t faults(Fault kind) const;
  [[nodiscard]] std::uint64_t faults_total() const;
  /// One line per open connection (id, bytes each way, time since the last byte, faults in
  /// effect), for a test's failure message.
  [[nodiscard]] std::vector<std::string> describe_connections() const;

  struct Impl;

 private:
  std::string upstream_host_;
  std::shared_ptr<Impl> impl_;
};

}  // namespace kinformer::e2e
