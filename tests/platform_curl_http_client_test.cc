// CurlHttpClient against an in-process HTTP server: methods, headers and
// bodies as sent, statuses as answered, and each kind of failure with its
// status code.

#include <cstdlib>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "platform/curl_http_client.h"
#include "tests/testing/http_test_server.h"

namespace backfill {
namespace platform_curl_http_client_test {
namespace {

using ::testing::HasSubstr;
using testing::HttpTestServer;

TEST(CurlHttpClientTest, GetReturnsStatusAndBody) {
  HttpTestServer server;
  server.SetHandler([](const HttpTestServer::Request& r) {
    return HttpTestServer::Response{
        r.target == "/value?day=2025-01-01" ? 200 : 404, "{\"amount\": 12.5}"};
  });
  CurlHttpClient client;
  HttpRequest get;
  get.url = server.Url("/value?day=2025-01-01");
  absl::StatusOr<HttpResponse> r = client.Send(get);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "{\"amount\": 12.5}");
  get.url = server.Url("/other");
  r = client.Send(get);
  ASSERT_TRUE(r.ok()) << r.status();  // an answer, whatever its status
  EXPECT_EQ(r->status, 404);
  ASSERT_EQ(server.requests().size(), 2u);
  EXPECT_EQ(server.requests()[0].method, "GET");
}

TEST(CurlHttpClientTest, PostSendsBodyAndHeadersAsGiven) {
  HttpTestServer server;
  CurlHttpClient client;
  HttpRequest post;
  post.method = "POST";
  post.url = server.Url("/invalidate");
  post.headers = {{"Content-Type", "application/json"},
                  {"Authorization", "Bearer t0ken"}};
  post.body = std::string("{\"partitions\": [\"2025-01-01\"]}") +
              std::string(100000, ' ');  // large: no 100-continue wait
  absl::StatusOr<HttpResponse> r = client.Send(post);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200);
  ASSERT_EQ(server.requests().size(), 1u);
  const HttpTestServer::Request got = server.requests()[0];
  EXPECT_EQ(got.method, "POST");
  EXPECT_EQ(got.target, "/invalidate");
  EXPECT_EQ(got.body, post.body);
  EXPECT_EQ(got.headers.at("authorization"), "Bearer t0ken");
  EXPECT_EQ(got.headers.at("content-type"), "application/json");
  EXPECT_EQ(got.headers.count("expect"), 0u);
}

TEST(CurlHttpClientTest, AHeaderThatWouldSplitTheRequestIsNotSent) {
  HttpTestServer server;
  CurlHttpClient client;
  for (const std::string& value :
       {std::string("Bearer abc\nX-Injected: 1"), std::string("Bearer abc\r"),
        std::string("Bearer abc\0def", 14)}) {
    HttpRequest get;
    get.url = server.Url("/value");
    get.headers = {{"Authorization", value}};
    absl::StatusOr<HttpResponse> r = client.Send(get);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("header Authorization"));
    EXPECT_THAT(r.status().message(), ::testing::Not(HasSubstr("abc")));
  }
  HttpRequest bad_name;
  bad_name.url = server.Url("/value");
  bad_name.headers = {{"X-A: 1\r\nX-B", "v"}};
  EXPECT_EQ(client.Send(bad_name).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(server.requests().empty());
}

TEST(CurlHttpClientTest, ProxyVariablesAreIgnored) {
  HttpTestServer cache;
  HttpTestServer proxy;  // would receive "GET http://127.0.0.1:.../value"
  setenv("http_proxy", proxy.Url("").c_str(), 1);
  setenv("ALL_PROXY", proxy.Url("").c_str(), 1);
  CurlHttpClient client;
  HttpRequest get;
  get.url = cache.Url("/value");
  get.headers = {{"Authorization", "Bearer t0ken"}};
  absl::StatusOr<HttpResponse> r = client.Send(get);
  unsetenv("http_proxy");
  unsetenv("ALL_PROXY");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(cache.requests().size(), 1u);
  EXPECT_TRUE(proxy.requests().empty());
}

TEST(CurlHttpClientTest, ASlowServerIsADeadline) {
  HttpTestServer server;
  server.SetHandler([](const HttpTestServer::Request&) {
    HttpTestServer::Response slow;
    slow.delay = absl::Seconds(2);
    return slow;
  });
  CurlHttpClient client;
  HttpRequest get;
  get.url = server.Url("/slow");
  get.timeout = absl::Milliseconds(200);
  absl::StatusOr<HttpResponse> r = client.Send(get);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded)
      << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr(get.url));
}

TEST(CurlHttpClientTest, NothingListeningIsUnavailable) {
  int port;
  {
    HttpTestServer gone;
    port = gone.port();
  }
  CurlHttpClient client;
  HttpRequest get;
  get.url = "http://127.0.0.1:" + std::to_string(port) + "/";
  absl::StatusOr<HttpResponse> r = client.Send(get);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
}

TEST(CurlHttpClientTest, OnlyHttpUrlsAndKnownMethods) {
  CurlHttpClient client;
  HttpRequest request;
  for (const char* url : {"file:///etc/passwd", "ftp://127.0.0.1/x",
                          "gopher://127.0.0.1/", "not a url"}) {
    request.url = url;
    EXPECT_EQ(client.Send(request).status().code(),
              absl::StatusCode::kInvalidArgument)
        << url;
  }
  request.url = "http://127.0.0.1:1/";
  request.method = "DELETE";
  EXPECT_EQ(client.Send(request).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CurlHttpClientTest, AnAnswerOverTheLimitIsRefused) {
  HttpTestServer server;
  server.SetHandler([](const HttpTestServer::Request&) {
    return HttpTestServer::Response{200, std::string(5000, 'x')};
  });
  CurlHttpClient client;
  HttpRequest get;
  get.url = server.Url("/big");
  get.max_response_bytes = 4096;
  absl::StatusOr<HttpResponse> r = client.Send(get);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted)
      << r.status();
  get.max_response_bytes = 5000;
  r = client.Send(get);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->body.size(), 5000u);
}

}  // namespace
}  // namespace platform_curl_http_client_test
}  // namespace backfill
