// HttpTestServer: a small HTTP/1.1 server on 127.0.0.1 and a free port for
// tests (a cache in front of a dataset, a lineage receiver). Each
// connection carries one request (Content-Length bodies only) and is
// answered by the handler, then closed. Every request is recorded.
// Thread-safe; the handler runs on the server's thread, one request at a
// time.

#ifndef BACKFILL_TESTS_TESTING_HTTP_TEST_SERVER_H_
#define BACKFILL_TESTS_TESTING_HTTP_TEST_SERVER_H_

#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace backfill::testing {

class HttpTestServer {
 public:
  struct Request {
    std::string method;
    std::string target;                          // path and query, as sent
    std::map<std::string, std::string> headers;  // names lowercased
    std::string body;
  };
  struct Response {
    int status = 200;
    std::string body;
    std::string content_type = "application/json";
    absl::Duration delay = absl::ZeroDuration();  // before answering
  };
  using Handler = std::function<Response(const Request&)>;

  // Starts listening at once; the default handler answers 200 "{}".
  HttpTestServer();
  ~HttpTestServer();  // stops and joins
  HttpTestServer(const HttpTestServer&) = delete;
  HttpTestServer& operator=(const HttpTestServer&) = delete;

  int port() const { return port_; }
  // "http://127.0.0.1:PORT" + path.
  std::string Url(const std::string& path) const;
  void SetHandler(Handler handler);
  std::vector<Request> requests() const;
  // Waits until at least `n` requests arrived; false at the timeout.
  bool WaitForRequests(size_t n, absl::Duration timeout) const;

 private:
  void Serve();
  void Answer(int fd);

  int listen_fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  Handler handler_ ABSL_GUARDED_BY(mu_);
  std::vector<Request> requests_ ABSL_GUARDED_BY(mu_);
};

}  // namespace backfill::testing

#endif  // BACKFILL_TESTS_TESTING_HTTP_TEST_SERVER_H_
