#include "platform/curl_http_client.h"

#include <curl/curl.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace backfill {
namespace {

struct EasyDeleter {
  void operator()(CURL* curl) const { curl_easy_cleanup(curl); }
};
struct ListDeleter {
  void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};

struct Sink {
  std::string* body;
  size_t limit;
  bool overflow = false;
};

size_t Write(char* data, size_t size, size_t count, void* user) {
  Sink* sink = static_cast<Sink*>(user);
  const size_t n = size * count;
  if (sink->body->size() + n > sink->limit) {
    sink->overflow = true;
    return 0;  // makes libcurl stop with CURLE_WRITE_ERROR
  }
  sink->body->append(data, n);
  return n;
}

long Millis(absl::Duration d) {
  const int64_t ms = absl::ToInt64Milliseconds(d);
  return ms < 1 ? 1 : static_cast<long>(ms);
}

}  // namespace

CurlHttpClient::CurlHttpClient() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

absl::StatusOr<HttpResponse> CurlHttpClient::Send(const HttpRequest& request) {
  if (request.method != "GET" && request.method != "POST") {
    return absl::InvalidArgumentError(
        absl::StrCat("HTTP method ", request.method, " is not supported"));
  }
  // libcurl sends header lines as they are: a CR, LF or NUL would end the
  // line early and smuggle the rest in as another header (or the body).
  for (const auto& [name, value] : request.headers) {
    constexpr std::string_view kBreaks("\r\n\0", 3);
    if (name.empty() || name.find_first_of(kBreaks) != std::string::npos ||
        name.find(':') != std::string::npos ||
        value.find_first_of(kBreaks) != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          request.method, " ", request.url, ": header ",
          name.find_first_of(kBreaks) == std::string::npos ? name
                                                           : "(a bad name)",
          " has a line break or NUL byte in its name or value (or a colon in "
          "its name); nothing was sent"));
    }
  }
  std::unique_ptr<CURL, EasyDeleter> curl(curl_easy_init());
  if (curl == nullptr) {
    return absl::InternalError("libcurl could not create a handle");
  }
  CURL* c = curl.get();
  HttpResponse response;
  Sink sink{&response.body, request.max_response_bytes};
  char error[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(c, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
                   Millis(request.connect_timeout));
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, Millis(request.timeout));
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &Write);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(c, CURLOPT_USERAGENT, "backfilld");
  // Never through a proxy: libcurl would otherwise honour http_proxy,
  // HTTPS_PROXY and ALL_PROXY from the daemon's environment and send
  // consumer requests, their headers included, to whatever they name.
  curl_easy_setopt(c, CURLOPT_PROXY, "");
  curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
  if (request.method == "POST") {
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE,
                     static_cast<curl_off_t>(request.body.size()));
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, request.body.data());
  }
  curl_slist* list = nullptr;
  for (const auto& [name, value] : request.headers) {
    const std::string line = absl::StrCat(name, ": ", value);
    curl_slist* appended = curl_slist_append(list, line.c_str());
    if (appended == nullptr) {
      curl_slist_free_all(list);
      return absl::InternalError("libcurl could not add a header");
    }
    list = appended;
  }
  // libcurl adds "Expect: 100-continue" to large POSTs; servers that do not
  // answer it would add a second of delay.
  list = curl_slist_append(list, "Expect:");
  std::unique_ptr<curl_slist, ListDeleter> headers(list);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());

  const CURLcode code = curl_easy_perform(c);
  if (code != CURLE_OK) {
    const std::string cause =
        error[0] != '\0' ? std::string(error) : curl_easy_strerror(code);
    const std::string what =
        absl::StrCat(request.method, " ", request.url, ": ", cause);
    switch (code) {
      case CURLE_UNSUPPORTED_PROTOCOL:
      case CURLE_URL_MALFORMAT:
        return absl::InvalidArgumentError(what);
      case CURLE_OPERATION_TIMEDOUT:
        return absl::DeadlineExceededError(what);
      case CURLE_WRITE_ERROR:
        if (sink.overflow) {
          return absl::ResourceExhaustedError(absl::StrCat(
              request.method, " ", request.url, ": the answer is longer than ",
              request.max_response_bytes, " bytes"));
        }
        return absl::UnavailableError(what);
      default:
        return absl::UnavailableError(what);
    }
  }
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  response.status = static_cast<int>(status);
  return response;
}

}  // namespace backfill
