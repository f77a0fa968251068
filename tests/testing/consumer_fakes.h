// Test doubles of the ports a downstream consumer's confirmation uses
// (core/ports/http_client.h, command_runner.h): an HTTP client and a command
// runner that record each request and answer with a handler the test
// gives, and builders of an HTTP answer and of the warehouse values an
// `expect` query returns.
//
// Not thread-safe: the confirmer calls them from the test's thread.

#ifndef BACKFILL_TESTS_TESTING_CONSUMER_FAKES_H_
#define BACKFILL_TESTS_TESTING_CONSUMER_FAKES_H_

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/base/json_value.h"
#include "core/ports/command_runner.h"
#include "core/ports/engine.h"
#include "core/ports/http_client.h"

namespace backfill::testing {

class FakeHttp : public HttpClient {
 public:
  using Handler =
      std::function<absl::StatusOr<HttpResponse>(const HttpRequest& request)>;
  explicit FakeHttp(Handler handler) : handler_(std::move(handler)) {}
  absl::StatusOr<HttpResponse> Send(const HttpRequest& request) override {
    requests.push_back(request);
    return handler_(request);
  }
  std::vector<HttpRequest> requests;

 private:
  Handler handler_;
};

class FakeCommands : public CommandRunner {
 public:
  using Handler = std::function<absl::StatusOr<CommandResult>(
      const CommandRequest& request)>;
  explicit FakeCommands(Handler handler) : handler_(std::move(handler)) {}
  absl::StatusOr<CommandResult> Run(const CommandRequest& request) override {
    runs.push_back(request.argv);
    return handler_(request);
  }
  std::vector<std::vector<std::string>> runs;

 private:
  Handler handler_;
};

inline HttpResponse Answer(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

inline SqlValue Real(double v) {
  SqlValue s;
  s.type = SqlValue::Type::kReal;
  s.real = v;
  return s;
}

inline SqlValue Text(std::string v) {
  SqlValue s;
  s.type = SqlValue::Type::kText;
  s.text = std::move(v);
  return s;
}

// A value a probe answers, from its JSON text (valid JSON only).
inline JsonValue Json(const std::string& text) { return *ParseJson(text); }

}  // namespace backfill::testing

#endif  // BACKFILL_TESTS_TESTING_CONSUMER_FAKES_H_
