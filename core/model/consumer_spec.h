// ConsumerSpec: a downstream consumer of a dataset as declared in its
// `consumers:` list (docs/pipeline-spec.md) — something that reads the
// published rows and may cache them (a cache, a dashboard's extract), with
// how to invalidate it, how to probe what it serves, and the warehouse
// query it must agree with. ParseConsumers reads and validates the list
// (errors `FILE:LINE: reason`, as the pipeline loader's); the helpers build
// the requests the confirm step sends. Secrets never live in the spec:
// header values keep their `${NAME}` references, resolved from the
// environment only when a request is built.
// Plain data and pure functions; thread-safe.

#ifndef BACKFILL_CORE_MODEL_CONSUMER_SPEC_H_
#define BACKFILL_CORE_MODEL_CONSUMER_SPEC_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace YAML {
class Node;
}

namespace backfill {

enum class ConsumerKind { kHttp, kCommand };
const char* ConsumerKindName(ConsumerKind kind);  // "http" / "command"

inline constexpr absl::Duration kDefaultConsumerTimeout = absl::Seconds(30);
inline constexpr absl::Duration kMaxConsumerTimeout = absl::Minutes(10);
inline constexpr int kMaxConsumerSample = 10000;
inline constexpr int kMaxConsumersPerDataset = 32;

struct ConsumerSpec {
  std::string name;  // unique within its dataset; an identifier
  ConsumerKind kind = ConsumerKind::kHttp;
  // kHttp: URLs (http:// or https://). The probe URL holds `{partition}`
  // where the partition value goes (URL-encoded).
  std::string invalidate_url;
  std::string probe_url;
  // Header name and value template, sent with both requests; a value may
  // reference environment variables as ${NAME}.
  std::vector<std::pair<std::string, std::string>> headers;
  // kCommand: argv (argv[0] the program, never a shell).
  std::vector<std::string> invalidate_command;
  std::vector<std::string> probe_command;
  std::string field;   // the top-level JSON field holding the served value
  int sample = 0;      // partitions probed per confirmation; 0: all
  std::string expect;  // one read-only SELECT, first column of first row
  absl::Duration timeout = kDefaultConsumerTimeout;
  int line = 0;  // where it was declared
  int expect_line = 0;
};

// Reads a dataset's `consumers:` value. `file` and `where` ("in dataset
// \"x\"") go into messages; `partition_key`: the expect query may use
// :partition_key (a time x key dataset) besides :partition,
// :partition_start and :partition_end. `partitioned`: whether
// the dataset has partitions (a probe URL must then say where the
// partition goes). INVALID_ARGUMENT `FILE:LINE: reason` for unknown or
// missing keys, a kind other than http or command, duplicate names, a URL
// that is not http(s), a command that is empty or names a shell, a header
// that would break the request, an environment variable that is not set,
// an expect query that is not one SELECT, a timeout out of range.
absl::StatusOr<std::vector<ConsumerSpec>> ParseConsumers(
    const YAML::Node& node, const std::string& file, const std::string& where,
    bool partition_key, bool partitioned);

// `value` with every ${NAME} replaced by the environment variable NAME.
// FAILED_PRECONDITION naming the variable (never a value) when one is
// unset.
absl::StatusOr<std::string> ExpandEnvironment(const std::string& value);

// The consumer's headers with every ${NAME} expanded, as each request
// sends them (the same for the invalidation and the probes). Errors name
// the header, never a value: FAILED_PRECONDITION when a variable is unset,
// INVALID_ARGUMENT when an expanded name or value holds CR, LF or NUL (a
// token read from a file often ends in a newline), which would split the
// request.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>>
ExpandedHeaders(const ConsumerSpec& consumer);

// The probe URL for `partition`: `{partition}` replaced by the value,
// percent-encoded (everything but A-Z a-z 0-9 - . _ ~).
std::string ProbeUrl(const ConsumerSpec& consumer,
                     const std::string& partition);

// The probe command for `partition`: each `{partition}` in an argument
// replaced by the value (as is: it is one argument, no shell reads it); the
// value is appended as the last argument when no argument holds
// `{partition}`.
std::vector<std::string> ProbeCommand(const ConsumerSpec& consumer,
                                      const std::string& partition);

// The invalidate command: the declared argv followed by the dataset, the
// job id and the partitions, one argument each. The confirm step runs it
// once per batch of at most kInvalidateBatch partitions, and sends an HTTP
// invalidation as one POST per batch of as many.
inline constexpr size_t kInvalidateBatch = 1000;
std::vector<std::string> InvalidateCommand(
    const ConsumerSpec& consumer, const std::string& dataset,
    const std::string& job_id, const std::vector<std::string>& partitions);

// How the invalidation reads in listings: "POST URL", or the command's
// argv joined with spaces (header values are never shown).
std::string DescribeInvalidate(const ConsumerSpec& consumer);

}  // namespace backfill

#endif  // BACKFILL_CORE_MODEL_CONSUMER_SPEC_H_
