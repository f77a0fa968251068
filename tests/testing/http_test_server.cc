#include "tests/testing/http_test_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace backfill::testing {
namespace {

const char* Reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    default:
      return "Status";
  }
}

void WriteAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

}  // namespace

HttpTestServer::HttpTestServer() {
  handler_ = [](const Request&) { return Response{200, "{}"}; };
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) std::abort();
  int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      listen(listen_fd_, 64) != 0) {
    std::abort();
  }
  socklen_t len = sizeof addr;
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  thread_ = std::thread([this] { Serve(); });
}

HttpTestServer::~HttpTestServer() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
  close(listen_fd_);
}

std::string HttpTestServer::Url(const std::string& path) const {
  return absl::StrCat("http://127.0.0.1:", port_, path);
}

void HttpTestServer::SetHandler(Handler handler) {
  absl::MutexLock lock(&mu_);
  handler_ = std::move(handler);
}

std::vector<HttpTestServer::Request> HttpTestServer::requests() const {
  absl::MutexLock lock(&mu_);
  return requests_;
}

bool HttpTestServer::WaitForRequests(size_t n, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return requests_.size() >= n;
  };
  return mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
}

void HttpTestServer::Serve() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
    }
    pollfd p{listen_fd_, POLLIN, 0};
    if (poll(&p, 1, 20) <= 0) continue;
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    Answer(fd);
    close(fd);
  }
}

void HttpTestServer::Answer(int fd) {
  // Reads the head, then Content-Length bytes of body; gives up after 5 s.
  std::string data;
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  size_t head_end = std::string::npos;
  size_t body_length = 0;
  while (absl::Now() < deadline) {
    if (head_end != std::string::npos &&
        data.size() >= head_end + 4 + body_length) {
      break;
    }
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    char buffer[8192];
    const ssize_t n = read(fd, buffer, sizeof buffer);
    if (n <= 0) return;
    data.append(buffer, static_cast<size_t>(n));
    if (head_end == std::string::npos) {
      head_end = data.find("\r\n\r\n");
      if (head_end != std::string::npos) {
        for (absl::string_view line : absl::StrSplit(
                 absl::string_view(data).substr(0, head_end), "\r\n")) {
          const size_t colon = line.find(':');
          if (colon == absl::string_view::npos) continue;
          if (absl::AsciiStrToLower(line.substr(0, colon)) ==
              "content-length") {
            absl::SimpleAtoi(absl::StripAsciiWhitespace(line.substr(colon + 1)),
                             &body_length);
          }
        }
      }
    }
  }
  if (head_end == std::string::npos) return;
  Request request;
  std::vector<std::string> lines =
      absl::StrSplit(data.substr(0, head_end), "\r\n");
  std::vector<std::string> first = absl::StrSplit(lines[0], ' ');
  if (first.size() >= 2) {
    request.method = first[0];
    request.target = first[1];
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    const size_t colon = lines[i].find(':');
    if (colon == std::string::npos) continue;
    request.headers[absl::AsciiStrToLower(lines[i].substr(0, colon))] =
        std::string(absl::StripAsciiWhitespace(lines[i].substr(colon + 1)));
  }
  request.body = data.substr(head_end + 4, body_length);
  Handler handler;
  {
    absl::MutexLock lock(&mu_);
    handler = handler_;
  }
  const Response response = handler(request);
  {
    absl::MutexLock lock(&mu_);
    requests_.push_back(request);
  }
  if (response.delay > absl::ZeroDuration()) absl::SleepFor(response.delay);
  WriteAll(fd, absl::StrCat("HTTP/1.1 ", response.status, " ",
                            Reason(response.status),
                            "\r\nContent-Type: ", response.content_type,
                            "\r\nContent-Length: ", response.body.size(),
                            "\r\nConnection: close\r\n\r\n", response.body));
}

}  // namespace backfill::testing
