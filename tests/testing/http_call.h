// HttpCall: one HTTP exchange for the tests of the HTTP API, over libcurl:
// any method, request headers, the response's status, headers and body;
// optionally TLS with a CA (and a client certificate). A stream (server-
// sent events) is read until the server ends it or `on_data` returns false.
//
// Header-only; each call uses its own easy handle and is thread-safe.

#ifndef BACKFILL_TESTS_TESTING_HTTP_CALL_H_
#define BACKFILL_TESTS_TESTING_HTTP_CALL_H_

#include <curl/curl.h>

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace backfill::testing {

struct HttpCallOptions {
  std::string method = "GET";
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  bool json_body = true;  // sends Content-Type: application/json with a body
  std::string ca_file;    // https: the CA to trust
  std::string client_cert_file;
  std::string client_key_file;
  long timeout_ms = 30000;
  // Called with each piece of the body as it arrives; false stops reading.
  std::function<bool(const std::string&)> on_data;
};

struct HttpCallResult {
  long status = 0;  // 0: no answer (error says why)
  std::string error;
  std::map<std::string, std::string> headers;  // names lowercased
  std::string body;
};

inline HttpCallResult HttpCall(const std::string& url,
                               const HttpCallOptions& options = {}) {
  struct State {
    HttpCallResult* result;
    const HttpCallOptions* options;
  };
  HttpCallResult result;
  State state{&result, &options};
  CURL* curl = curl_easy_init();
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, options.timeout_ms);
  curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, options.method.c_str());
  if (options.method == "HEAD") curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
  curl_slist* headers = nullptr;
  for (const auto& [name, value] : options.headers) {
    headers =
        curl_slist_append(headers, absl::StrCat(name, ": ", value).c_str());
  }
  if (!options.body.empty() || options.method == "POST") {
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, options.body.c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE,
                     static_cast<long>(options.body.size()));
    if (options.json_body) {
      headers = curl_slist_append(headers, "Content-Type: application/json");
    }
  }
  // No "Expect: 100-continue" round trip.
  headers = curl_slist_append(headers, "Expect:");
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  if (!options.ca_file.empty()) {
    curl_easy_setopt(curl, CURLOPT_CAINFO, options.ca_file.c_str());
  }
  if (!options.client_cert_file.empty()) {
    curl_easy_setopt(curl, CURLOPT_SSLCERT, options.client_cert_file.c_str());
    curl_easy_setopt(curl, CURLOPT_SSLKEY, options.client_key_file.c_str());
  }
  curl_easy_setopt(
      curl, CURLOPT_WRITEFUNCTION,
      +[](char* data, size_t size, size_t n, void* user) -> size_t {
        auto* s = static_cast<State*>(user);
        std::string piece(data, size * n);
        s->result->body.append(piece);
        if (s->options->on_data && !s->options->on_data(piece)) return 0;
        return size * n;
      });
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &state);
  curl_easy_setopt(
      curl, CURLOPT_HEADERFUNCTION,
      +[](char* data, size_t size, size_t n, void* user) -> size_t {
        auto* s = static_cast<State*>(user);
        std::string line(data, size * n);
        const size_t colon = line.find(':');
        if (colon != std::string::npos) {
          s->result->headers[absl::AsciiStrToLower(line.substr(0, colon))] =
              std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
        }
        return size * n;
      });
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &state);
  const CURLcode code = curl_easy_perform(curl);
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &result.status);
  if (code != CURLE_OK && code != CURLE_WRITE_ERROR) {
    result.error = curl_easy_strerror(code);
    if (result.status == 0) result.body.clear();
  }
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  return result;
}

// The `data:` payloads of a server-sent event stream, and the event type
// of each ("" for the default).
struct SseEvent {
  std::string event;
  std::string data;
};

inline std::vector<SseEvent> ParseSse(const std::string& stream) {
  std::vector<SseEvent> events;
  SseEvent current;
  size_t start = 0;
  while (start < stream.size()) {
    size_t end = stream.find('\n', start);
    if (end == std::string::npos) break;
    const std::string line = stream.substr(start, end - start);
    start = end + 1;
    if (line.empty()) {
      if (!current.data.empty() || !current.event.empty()) {
        events.push_back(current);
      }
      current = SseEvent();
    } else if (absl::StartsWith(line, "data: ")) {
      current.data += line.substr(6);
    } else if (absl::StartsWith(line, "event: ")) {
      current.event = line.substr(7);
    }
  }
  return events;
}

}  // namespace backfill::testing

#endif  // BACKFILL_TESTS_TESTING_HTTP_CALL_H_
