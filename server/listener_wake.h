// WakeListener: opens a TCP connection to a local server's listening socket
// and closes it at once, so that a server thread blocked in poll() on that
// socket returns from it and looks at its stop flag.
//
// The /metrics server (civetweb, under prometheus-cpp's Exposer) notices
// that it is being stopped only when its listening thread's poll() returns,
// which for an idle server is once every 2 s: stopping it took 0-2 s, and
// the daemon's shutdown with it. A connection during the stop ends that
// wait. The connection is closed as soon as it is established (or after
// 100 ms), without sending anything.
//
// Thread-safe (no shared state).

#ifndef BACKFILL_SERVER_LISTENER_WAKE_H_
#define BACKFILL_SERVER_LISTENER_WAKE_H_

#include <string>

namespace backfill {

// The host to connect to for a server listening on `listen_address`
// ("HOST:PORT", an IPv6 HOST in brackets): the loopback address of the same
// family for a wildcard HOST ("", "0.0.0.0", "*", "[::]"), else the HOST.
std::string WakeHost(const std::string& listen_address);

// Connects to `host`:`port` (every address the host resolves to) and closes
// each connection once established; returns whether any was. Waits at most
// 100 ms per address.
bool WakeListener(const std::string& host, int port);

}  // namespace backfill

#endif  // BACKFILL_SERVER_LISTENER_WAKE_H_
