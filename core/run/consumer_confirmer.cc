#include "core/run/consumer_confirmer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace backfill {
namespace {

constexpr size_t kMaxShown = 200;  // bytes of one value in a message

std::string Clip(std::string s, size_t max) {
  if (s.size() <= max) return s;
  s.resize(max);
  // Never cut a UTF-8 sequence in two.
  while (!s.empty() && (static_cast<unsigned char>(s.back()) & 0xC0) == 0x80) {
    s.pop_back();
  }
  if (!s.empty() && static_cast<unsigned char>(s.back()) >= 0xC0) s.pop_back();
  return s + "...";
}

std::string Quoted(const std::string& text) {
  return absl::StrCat("'", Clip(text, kMaxShown), "'");
}

// The shortest decimal text that reads back as exactly `v` (76219.02, not
// StrCat's six significant digits, 76219): the value a person compares
// with what the consumer served.
std::string ShortestRoundTrip(double v) {
  char buffer[32];
  for (int precision = 15; precision <= 17; ++precision) {
    std::snprintf(buffer, sizeof buffer, "%.*g", precision, v);
    if (std::strtod(buffer, nullptr) == v) break;
  }
  return buffer;
}

std::string ShowJson(const JsonValue& v) {
  switch (v.type) {
    case JsonValue::Type::kNull:
      return "null";
    case JsonValue::Type::kBool:
      return v.boolean ? "true" : "false";
    case JsonValue::Type::kNumber:
      return Clip(v.number_text, kMaxShown);
    case JsonValue::Type::kString:
      return Quoted(v.text);
    case JsonValue::Type::kArray:
      return "a JSON list";
    case JsonValue::Type::kObject:
      return "a JSON object";
  }
  return "?";
}

// The answer's body, trimmed, for a message.
std::string Excerpt(const std::string& body) {
  std::string s(absl::StripAsciiWhitespace(body));
  for (char& c : s) {
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  }
  return s.empty() ? "an empty answer" : Quoted(s);
}

bool Retryable(int status) { return status >= 500 || status == 429; }

// A warehouse error that may pass (busy, locked, I/O, disk full): worth
// another attempt. A query that does not compile, or runs too long, will
// not do better.
bool TransientWarehouseError(const absl::Status& s) {
  return s.code() == absl::StatusCode::kUnavailable ||
         s.code() == absl::StatusCode::kResourceExhausted;
}

// How a command that did not exit 0 ended: "`what` exited with status 3
// ('cannot connect')", "... was killed by signal 9".
std::string DescribeExit(const std::string& what, const CommandResult& r) {
  return absl::StrCat(what, " ",
                      r.signal != 0
                          ? absl::StrCat("was killed by signal ", r.signal)
                          : absl::StrCat("exited with status ", r.exit_code),
                      r.error_output.empty()
                          ? std::string()
                          : absl::StrCat(" (", Excerpt(r.error_output), ")"));
}

// The longest a wait goes without asking whether the service is stopping.
constexpr absl::Duration kStopCheck = absl::Milliseconds(500);

// `d` for a message: whole milliseconds (1.659s, not 1.659590051s).
std::string Rounded(absl::Duration d) {
  return absl::FormatDuration(absl::Trunc(d, absl::Milliseconds(1)));
}

}  // namespace

ConsumerConfirmer::ConsumerConfirmer(Engine* engine, HttpClient* http,
                                     CommandRunner* commands,
                                     const Clock* clock,
                                     std::function<bool()> stopping,
                                     ConfirmerOptions options)
    : engine_(engine),
      http_(http),
      commands_(commands),
      clock_(clock),
      stopping_(std::move(stopping)),
      options_(options) {}

std::vector<std::string> ConsumerConfirmer::ProbedPartitions(
    std::vector<std::string> partitions, int sample) {
  std::sort(partitions.begin(), partitions.end());
  partitions.erase(std::unique(partitions.begin(), partitions.end()),
                   partitions.end());
  const size_t n = partitions.size();
  if (sample <= 0 || static_cast<size_t>(sample) >= n) return partitions;
  if (sample == 1) return {partitions.back()};
  std::vector<std::string> out;
  const size_t k = static_cast<size_t>(sample);
  for (size_t i = 0; i < k; ++i) {
    // Evenly spaced, first and last included; distinct as k <= n.
    out.push_back(partitions[i * (n - 1) / (k - 1)]);
  }
  return out;
}

std::string ConsumerConfirmer::Show(const SqlValue& value) {
  switch (value.type) {
    case SqlValue::Type::kNoRow:
      return "NULL (the expect query returned no row)";
    case SqlValue::Type::kNull:
      return "NULL";
    case SqlValue::Type::kInteger:
      return absl::StrCat(value.integer);
    case SqlValue::Type::kReal:
      return ShortestRoundTrip(value.real);
    case SqlValue::Type::kText:
      return Quoted(value.text);
  }
  return "?";
}

std::optional<std::string> ConsumerConfirmer::Disagreement(
    const SqlValue& expected, const JsonValue* served,
    const std::string& field) {
  if (served == nullptr) {
    return absl::StrCat("an answer without the field ",
                        Quoted(field).substr(0, kMaxShown + 5));
  }
  switch (expected.type) {
    case SqlValue::Type::kNoRow:
    case SqlValue::Type::kNull:
      if (served->type == JsonValue::Type::kNull) return std::nullopt;
      break;
    case SqlValue::Type::kInteger:
    case SqlValue::Type::kReal: {
      if (served->type != JsonValue::Type::kNumber) break;
      const double want = expected.type == SqlValue::Type::kInteger
                              ? static_cast<double>(expected.integer)
                              : expected.real;
      const double got = served->number;
      if (want == got || std::fabs(want - got) <=
                             1e-9 * std::max(std::fabs(want), std::fabs(got))) {
        return std::nullopt;
      }
      break;
    }
    case SqlValue::Type::kText:
      if (served->type == JsonValue::Type::kString &&
          served->text == expected.text) {
        return std::nullopt;
      }
      break;
  }
  return ShowJson(*served);
}

absl::Duration ConsumerConfirmer::RequestTimeout(absl::Time deadline,
                                                 bool floor) const {
  absl::Duration left = deadline - clock_->Now();
  if (floor) left = std::max(left, absl::Seconds(1));
  return std::max(std::min(left, options_.max_request), absl::Milliseconds(1));
}

bool ConsumerConfirmer::Pause(absl::Duration d) const {
  while (d > absl::ZeroDuration()) {
    if (Stopping()) return false;
    const absl::Duration slice = std::min(d, kStopCheck);
    clock_->SleepFor(slice);
    d -= slice;
  }
  return !Stopping();
}

ConsumerConfirmation ConsumerConfirmer::Begin(
    const DatasetSpec& dataset, const ConsumerSpec& consumer,
    const std::string& job_id,
    const std::vector<std::string>& partitions) const {
  ConsumerConfirmation c;
  c.result.dataset = dataset.name;
  c.result.consumer = consumer.name;
  c.dataset = &dataset;
  c.consumer = &consumer;
  c.partitions = partitions;
  c.start = clock_->Now();
  c.deadline = c.start + consumer.timeout;
  c.next = c.start;
  c.who = absl::StrCat("consumer ", consumer.name, " of ", dataset.name);
  c.backoff = options_.first_backoff;
  c.poll = options_.first_poll;
  // The invalidation's requests, built once; each is sent until it is done.
  if (consumer.kind == ConsumerKind::kHttp) {
    if (http_ == nullptr) {
      Finish(&c, false,
             absl::StrCat(c.who, ": backfilld has no HTTP client configured"));
      return c;
    }
    absl::StatusOr<std::vector<std::pair<std::string, std::string>>> headers =
        ExpandedHeaders(consumer);
    if (!headers.ok()) {
      Finish(&c, false, absl::StrCat(c.who, ": ", headers.status().message()));
      return c;
    }
    headers->emplace_back("Content-Type", "application/json");
    // One POST per batch of kInvalidateBatch partitions, as for commands:
    // the body stays small whatever the job's size.
    for (size_t i = 0; i < partitions.size() || i == 0; i += kInvalidateBatch) {
      const size_t end = std::min(partitions.size(), i + kInvalidateBatch);
      std::vector<std::string> quoted;
      for (size_t k = i; k < end; ++k) {
        quoted.push_back(JsonQuote(partitions[k]));
      }
      HttpRequest post;
      post.method = "POST";
      post.url = consumer.invalidate_url;
      post.headers = *headers;
      post.body =
          absl::StrCat("{\"dataset\":", JsonQuote(dataset.name),
                       ",\"job\":", JsonQuote(job_id), ",\"partitions\":[",
                       absl::StrJoin(quoted, ","), "]}");
      c.posts.push_back(std::move(post));
      if (end >= partitions.size()) break;
    }
  } else {
    if (commands_ == nullptr) {
      Finish(&c, false,
             absl::StrCat(c.who, ": backfilld has no command runner"));
      return c;
    }
    for (size_t i = 0; i < partitions.size() || i == 0; i += kInvalidateBatch) {
      const size_t end = std::min(partitions.size(), i + kInvalidateBatch);
      CommandRequest run;
      run.argv =
          InvalidateCommand(consumer, dataset.name, job_id,
                            std::vector<std::string>(partitions.begin() + i,
                                                     partitions.begin() + end));
      c.runs.push_back(std::move(run));
      if (end >= partitions.size()) break;
    }
  }
  return c;
}

void ConsumerConfirmer::Finish(ConsumerConfirmation* c, bool healthy,
                               std::string message) const {
  c->done = true;
  c->invalidating = false;
  c->result.healthy = healthy;
  c->result.message = Clip(std::move(message), kMaxConsumerMessage);
  c->result.latency = clock_->Now() - c->start;
}

void ConsumerConfirmer::Interrupted(ConsumerConfirmation* c) const {
  c->result.interrupted = true;
  Finish(c, false, "interrupted");
}

bool ConsumerConfirmer::WaitUntil(absl::Time t) const {
  return Pause(t - clock_->Now());
}

void ConsumerConfirmer::Step(ConsumerConfirmation* c) const {
  if (c->done) return;
  if (Stopping()) {
    Interrupted(c);
  } else if (c->invalidating) {
    InvalidateStep(c);
  } else if (!c->read) {
    ReadExpected(c);
  } else {
    ProbeRound(c);
  }
}

void ConsumerConfirmer::InvalidateStep(ConsumerConfirmation* c) const {
  const size_t total = c->posts.size() + c->runs.size();
  // Before every request: the time may be up.
  if (clock_->Now() >= c->deadline) {
    if (!c->last_error.empty()) {
      Finish(c, false,
             absl::StrCat(c->who, ": invalidation failed after ", c->attempts,
                          c->attempts == 1 ? " attempt" : " attempts", ": ",
                          c->last_error));
    } else {
      Finish(c, false,
             absl::StrCat(c->who,
                          ": invalidation did not finish within the timeout (",
                          c->sent, " of ", total, " requests done)"));
    }
    return;
  }
  ++c->attempts;
  std::string error;
  bool final = false;
  if (c->sent < c->posts.size()) {
    HttpRequest request = c->posts[c->sent];
    request.timeout = RequestTimeout(c->deadline, false);
    request.connect_timeout = std::min(request.timeout, absl::Seconds(5));
    absl::StatusOr<HttpResponse> r = http_->Send(request);
    if (!r.ok()) {
      error = std::string(r.status().message());
      final = r.status().code() == absl::StatusCode::kInvalidArgument;
    } else if (r->status < 200 || r->status > 299) {
      error = absl::StrCat("POST ", request.url, " answered HTTP ", r->status,
                           ": ", Excerpt(r->body));
      final = !Retryable(r->status);
    }
  } else {
    CommandRequest request = c->runs[c->sent - c->posts.size()];
    request.timeout = RequestTimeout(c->deadline, false);
    absl::StatusOr<CommandResult> r = commands_->Run(request);
    if (!r.ok()) {
      error = std::string(r.status().message());
      final = r.status().code() == absl::StatusCode::kNotFound ||
              r.status().code() == absl::StatusCode::kInvalidArgument;
    } else if (r->exit_code != 0) {
      error = DescribeExit("the invalidate command", *r);
    }
  }
  const absl::Time now = clock_->Now();
  if (error.empty()) {
    if (++c->sent == total) c->invalidating = false;
    c->next = now;
    return;
  }
  if (final) {
    Finish(c, false, absl::StrCat(c->who, ": invalidation refused: ", error));
    return;
  }
  c->last_error = std::move(error);
  c->next = std::min(now + c->backoff, c->deadline);
  c->backoff = std::min(c->backoff * 2, options_.max_wait);
}
ConsumerConfirmer::Served ConsumerConfirmer::Probe(
    const ConsumerSpec& consumer, const std::string& partition,
    absl::Duration timeout) const {
  Served out;
  std::string body;
  if (consumer.kind == ConsumerKind::kHttp) {
    if (http_ == nullptr) {
      out.error = "backfilld has no HTTP client configured";
      return out;
    }
    HttpRequest get;
    get.url = ProbeUrl(consumer, partition);
    get.timeout = timeout;
    get.connect_timeout = std::min(get.timeout, absl::Seconds(5));
    absl::StatusOr<std::vector<std::pair<std::string, std::string>>> headers =
        ExpandedHeaders(consumer);
    if (!headers.ok()) {
      out.error = std::string(headers.status().message());
      return out;
    }
    get.headers = *std::move(headers);
    absl::StatusOr<HttpResponse> r = http_->Send(get);
    if (!r.ok()) {
      out.error = std::string(r.status().message());
      return out;
    }
    if (r->status < 200 || r->status > 299) {
      out.error = absl::StrCat("GET ", get.url, " answered HTTP ", r->status,
                               ": ", Excerpt(r->body));
      return out;
    }
    body = std::move(r->body);
  } else {
    if (commands_ == nullptr) {
      out.error = "backfilld has no command runner";
      return out;
    }
    CommandRequest run;
    run.argv = ProbeCommand(consumer, partition);
    run.timeout = timeout;
    absl::StatusOr<CommandResult> r = commands_->Run(run);
    if (!r.ok()) {
      out.error = std::string(r.status().message());
      return out;
    }
    if (r->exit_code != 0) {
      out.error = DescribeExit("the command", *r);
      return out;
    }
    if (r->output_truncated) {
      out.error = "an answer longer than the output limit";
      return out;
    }
    body = std::move(r->output);
  }
  absl::StatusOr<JsonValue> json = ParseJson(body);
  if (!json.ok()) {
    out.error = absl::StrCat("an answer that is not JSON (",
                             json.status().message(), "): ", Excerpt(body));
    return out;
  }
  if (json->type != JsonValue::Type::kObject) {
    out.error =
        absl::StrCat("a JSON answer that is not an object: ", Excerpt(body));
    return out;
  }
  out.ok = true;
  auto it = json->fields.find(consumer.field);
  if (it != json->fields.end()) out.value = std::move(it->second);
  return out;
}

ConsumerResult ConsumerConfirmer::Confirm(
    const DatasetSpec& dataset, const ConsumerSpec& consumer,
    const std::string& job_id,
    const std::vector<std::string>& partitions) const {
  ConsumerConfirmation c = Begin(dataset, consumer, job_id, partitions);
  while (!c.done) {
    if (!WaitUntil(c.next)) {
      Interrupted(&c);
      break;
    }
    Step(&c);
  }
  return c.result;
}

void ConsumerConfirmer::ReadExpected(ConsumerConfirmation* c) const {
  // What the warehouse says, once per probed partition: the job holds its
  // partitions while it confirms, so the published rows do not change. An
  // error that may pass (busy, I/O) is retried with backoff until the
  // deadline; a failure is the warehouse's, not the consumer's. The
  // consumer was invalidated before: whatever happens here, it has been
  // told to drop the old numbers.
  c->probed = ProbedPartitions(c->partitions, c->consumer->sample);
  auto unreadable = [&](const std::string& p, const std::string& why) {
    c->result.warehouse_error = true;
    Finish(c, false,
           absl::StrCat(c->who, ": could not read the warehouse's value",
                        p.empty() ? "" : " for partition ", p, " (", why,
                        "); the consumer was invalidated, but whether it "
                        "serves the new numbers is unknown"));
  };
  for (const std::string& p : c->probed) {
    absl::Duration backoff = options_.first_backoff;
    int attempts = 0;
    while (true) {
      if (Stopping()) return Interrupted(c);
      if (clock_->Now() >= c->deadline) {
        return unreadable(
            p, absl::StrCat("the expect queries did not finish within the "
                            "timeout: ",
                            c->expected.size(), " of ", c->probed.size(),
                            " partitions read after ",
                            Rounded(clock_->Now() - c->start), ", timeout ",
                            Rounded(c->consumer->timeout)));
      }
      ++attempts;
      absl::StatusOr<SqlValue> v =
          engine_->QueryValue(*c->dataset, p, c->consumer->expect);
      if (v.ok()) {
        c->expected[p] = *std::move(v);
        break;
      }
      const absl::Duration left = c->deadline - clock_->Now();
      if (!TransientWarehouseError(v.status()) || left <= backoff) {
        return unreadable(
            p, absl::StrCat(
                   "the expect query failed",
                   attempts > 1 ? absl::StrCat(" ", attempts, " times") : "",
                   ": ", v.status().message()));
      }
      if (!Pause(backoff)) return Interrupted(c);
      backoff = std::min(backoff * 2, options_.max_wait);
    }
  }
  c->read = true;
  c->pending.insert(c->probed.begin(), c->probed.end());
  c->next = clock_->Now();
}

void ConsumerConfirmer::ProbeRound(ConsumerConfirmation* c) const {
  // A round of probes of the partitions that still differ. Before every
  // probe: stop? out of time?
  bool probed_any = false;
  for (auto it = c->pending.begin(); it != c->pending.end();) {
    if (Stopping()) return Interrupted(c);
    if (clock_->Now() >= c->deadline) break;
    const bool first = c->last.count(*it) == 0;
    Served served =
        Probe(*c->consumer, *it, RequestTimeout(c->deadline, first));
    probed_any = true;
    std::optional<std::string> differs;
    if (!served.ok) {
      differs = served.error;
    } else {
      differs = Disagreement(c->expected[*it],
                             served.value ? &*served.value : nullptr,
                             c->consumer->field);
    }
    if (!differs) {
      c->last.erase(*it);
      c->failed.erase(*it);
      it = c->pending.erase(it);
    } else {
      c->last[*it] = *differs;
      if (served.ok) {
        c->failed.erase(*it);
      } else {
        c->failed.insert(*it);
      }
      ++it;
    }
  }
  if (probed_any) ++c->rounds;
  const size_t n = c->probed.size();
  if (c->pending.empty()) {
    return Finish(
        c, true,
        absl::StrCat(c->who, " serves the new numbers (",
                     n == c->partitions.size()
                         ? absl::StrCat(n, n == 1 ? " partition probed)"
                                                  : " partitions probed)")
                         : absl::StrCat(n, " of ", c->partitions.size(),
                                        " partitions probed, sampled)")));
  }
  // The next round, 250 ms doubling up to 5 s later. The wait before the
  // last round leaves it up to 1 s for its requests, so that the last look
  // is not wasted at the deadline itself.
  const absl::Time now = clock_->Now();
  const absl::Duration left = c->deadline - now;
  if (!c->final_round && left > absl::ZeroDuration()) {
    const absl::Duration reserve = std::min(absl::Seconds(1), left / 2);
    absl::Duration wait = c->poll;
    if (wait >= left - reserve) {
      wait = left - reserve;
      c->final_round = true;
    }
    c->next = now + wait;
    c->poll = std::min(c->poll * 2, options_.max_wait);
    return;
  }

  // Unhealthy: name the first partition that was probed and still differs.
  size_t differ = 0;
  const std::string* shown = nullptr;
  for (const std::string& p : c->pending) {
    if (c->last.count(p) == 0) continue;
    ++differ;
    if (shown == nullptr) shown = &p;
  }
  const size_t unprobed = c->pending.size() - differ;
  std::string elapsed =
      absl::StrCat("after ", Rounded(now - c->start), " (timeout ",
                   Rounded(c->consumer->timeout), "; ", c->rounds,
                   c->rounds == 1 ? " probe round" : " probe rounds");
  if (differ > 1) {
    absl::StrAppend(&elapsed, "; ", differ, " of ", n,
                    " probed partitions differ");
  }
  if (unprobed > 0) {
    absl::StrAppend(&elapsed, "; ", unprobed, " of ", n,
                    " partitions not probed before the timeout");
  }
  absl::StrAppend(&elapsed, ")");
  if (shown == nullptr) {
    return Finish(c, false,
                  absl::StrCat(c->who,
                               " was invalidated, but its timeout passed "
                               "before a partition was probed: ",
                               elapsed));
  }
  const std::string& p = *shown;
  const std::string where = p.empty() ? "" : absl::StrCat(" for partition ", p);
  if (c->failed.count(p) > 0) {
    // What came back was no served value: the error goes last, where the
    // message's bound may clip it.
    return Finish(c, false,
                  absl::StrCat(c->who, ": the probe failed", where,
                               " (the warehouse has ", Show(c->expected[p]),
                               ") ", elapsed, ": ", c->last[p]));
  }
  Finish(c, false,
         absl::StrCat(c->who, " still serves ", c->last[p], where,
                      " where the warehouse has ", Show(c->expected[p]), " ",
                      elapsed));
}

}  // namespace backfill
