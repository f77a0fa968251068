// ConsumerConfirmer: confirms one downstream consumer (consumer_spec.h) of
// one dataset after a publish — invalidates it (HTTP POST of a JSON body,
// or its command; retried with backoff on errors, 5xx and 429), then reads
// the expected values (the `expect` query on the warehouse,
// Engine::QueryValue; busy or I/O errors retried), then probes each chosen
// partition until it serves what the warehouse has, or the
// consumer's timeout passes. The timeout bounds the whole confirmation:
// the deadline and the stop signal are checked before every request and
// query, and a request never waits past the deadline (but the first probe
// of a partition gets at least 1 s). Every wait goes through the injected
// Clock.
// Numbers agree within 1e-9 relative, text exactly, NULL only with JSON
// null (a query with no row expects null; a missing field never agrees).
//
// Does not own the engine, HTTP client, command runner or clock. Stateless
// between calls; thread-safe as its collaborators are.

#ifndef BACKFILL_CORE_RUN_CONSUMER_CONFIRMER_H_
#define BACKFILL_CORE_RUN_CONSUMER_CONFIRMER_H_

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "core/base/clock.h"
#include "core/base/json_value.h"
#include "core/model/catalog.h"
#include "core/model/consumer_spec.h"
#include "core/ports/command_runner.h"
#include "core/ports/engine.h"
#include "core/ports/http_client.h"

namespace backfill {

// What confirming one consumer found.
struct ConsumerResult {
  std::string dataset;
  std::string consumer;
  bool healthy = false;
  // Healthy: what was confirmed. Otherwise why not: the partition, the
  // expected and the served values (at most kMaxConsumerMessage bytes).
  std::string message;
  absl::Duration latency;    // from the invalidation to the last probe
  bool interrupted = false;  // the service stopped before it was decided
  // The warehouse's value could not be read (the expect query failed):
  // unconfirmed, but nothing says the consumer is wrong.
  bool warehouse_error = false;
};
inline constexpr size_t kMaxConsumerMessage = 1024;

struct ConfirmerOptions {
  absl::Duration first_backoff = absl::Milliseconds(200);  // invalidation
  absl::Duration first_poll = absl::Milliseconds(250);     // between probes
  absl::Duration max_wait = absl::Seconds(5);      // cap of either, doubling
  absl::Duration max_request = absl::Seconds(10);  // one request or command
};

// One consumer's confirmation in progress: ConsumerConfirmer::Begin makes
// it, Step advances it until `done`. Lets the confirm step invalidate every
// consumer before it probes any, and probe them all in one loop. Plain
// data owned by the caller; used by one thread at a time.
struct ConsumerConfirmation {
  ConsumerResult result;  // final once `done`
  bool done = false;
  absl::Time next;  // when Step has something to do next
  // Still invalidating (such steps go before any probe that is due).
  bool invalidating = true;

  // What ConsumerConfirmer keeps between steps.
  const DatasetSpec* dataset = nullptr;
  const ConsumerSpec* consumer = nullptr;
  std::vector<std::string> partitions;  // republished, to invalidate
  absl::Time start;
  absl::Time deadline;
  std::string who;  // "consumer C of D"
  // The invalidation: its requests, how many are done, the retries.
  std::vector<HttpRequest> posts;
  std::vector<CommandRequest> runs;
  size_t sent = 0;
  int attempts = 0;
  absl::Duration backoff;
  std::string last_error;
  // The probes: expected values once read, what still differs.
  bool read = false;
  std::vector<std::string> probed;
  std::map<std::string, SqlValue> expected;
  std::set<std::string> pending;
  std::map<std::string, std::string> last;  // served, or why the probe failed
  std::set<std::string> failed;             // whose last probe failed
  absl::Duration poll;
  int rounds = 0;
  bool final_round = false;
};

class ConsumerConfirmer {
 public:
  // `http` or `commands` may be null: a consumer that needs it is
  // unhealthy, saying so. `stopping` (may be empty) is asked before every
  // request, query and between waits: true ends the confirmation early,
  // `interrupted`.
  ConsumerConfirmer(Engine* engine, HttpClient* http, CommandRunner* commands,
                    const Clock* clock, std::function<bool()> stopping,
                    ConfirmerOptions options = {});

  // Invalidates `consumer` for `partitions` (what the job republished of
  // `dataset`, sorted) and probes the chosen ones (ProbedPartitions):
  // Begin, then Step at each `next` until done.
  ConsumerResult Confirm(const DatasetSpec& dataset,
                         const ConsumerSpec& consumer,
                         const std::string& job_id,
                         const std::vector<std::string>& partitions) const;

  // A confirmation of `consumer` whose timeout starts now, its first step
  // due now. `dataset` and `consumer` must outlive it.
  ConsumerConfirmation Begin(const DatasetSpec& dataset,
                             const ConsumerSpec& consumer,
                             const std::string& job_id,
                             const std::vector<std::string>& partitions) const;
  // One step of `c`: one invalidation request (or command batch), or
  // reading the expected values, or one round of probes; then sets when
  // the next is due, or ends it (`done`, `result`). Never waits for more
  // than a retry of a busy warehouse.
  void Step(ConsumerConfirmation* c) const;
  // Sleeps on the clock until `t`, in slices, asking `stopping` between
  // them; false when the service is stopping.
  bool WaitUntil(absl::Time t) const;

  // The partitions probed: all of `partitions` (sorted) without a sample or
  // with one at least as large; else `sample` of them evenly spaced over
  // the sorted list, the first and the last included (one: the last).
  static std::vector<std::string> ProbedPartitions(
      std::vector<std::string> partitions, int sample);

  // nullopt when `served` (a field of the answer; null when missing)
  // agrees with `expected`; otherwise the served value as a message shows
  // it.
  static std::optional<std::string> Disagreement(const SqlValue& expected,
                                                 const JsonValue* served,
                                                 const std::string& field);

  // `value` as a message shows it (NULL, 12.5, 'text').
  static std::string Show(const SqlValue& value);

 private:
  // The steps of each phase.
  void InvalidateStep(ConsumerConfirmation* c) const;
  void ReadExpected(ConsumerConfirmation* c) const;
  void ProbeRound(ConsumerConfirmation* c) const;
  // Ends `c` with `message` (clipped), the latency measured now.
  void Finish(ConsumerConfirmation* c, bool healthy, std::string message) const;
  void Interrupted(ConsumerConfirmation* c) const;
  // One probe: the served field (nullopt: the answer has no such field) or
  // an error describing what came back instead.
  struct Served {
    bool ok = false;
    std::optional<JsonValue> value;  // ok: nullopt when the field is missing
    std::string error;               // !ok
  };
  Served Probe(const ConsumerSpec& consumer, const std::string& partition,
               absl::Duration timeout) const;
  // How long the next request may take: the time left before `deadline`,
  // at most options_.max_request; at least 1 s when `floor` (the first
  // probe of a partition, so that each gets a fair chance once).
  absl::Duration RequestTimeout(absl::Time deadline, bool floor) const;
  // Sleeps `d` on the clock in slices, asking `stopping` between them;
  // false when the service is stopping.
  bool Pause(absl::Duration d) const;
  bool Stopping() const { return stopping_ && stopping_(); }

  Engine* const engine_;
  HttpClient* const http_;
  CommandRunner* const commands_;
  const Clock* const clock_;
  const std::function<bool()> stopping_;
  const ConfirmerOptions options_;
};

}  // namespace backfill

#endif  // BACKFILL_CORE_RUN_CONSUMER_CONFIRMER_H_
