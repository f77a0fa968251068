#include "client/job_follower.h"

#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cstring>
#include <iostream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/cli_format.h"

namespace backfill {
namespace cli {
namespace {

constexpr absl::Duration kPollInterval = absl::Milliseconds(500);
// How long polling tolerates a server that went away (e.g. restarting)
// before giving up on a job it has already seen.
constexpr absl::Duration kPollOutageTolerance = absl::Seconds(60);

// Draws the progress of a followed job on stderr: a bar redrawn in place on
// a terminal, otherwise a plain line per state change or ~10% of progress.
class ProgressReporter {
 public:
  ProgressReporter() : tty_(isatty(STDERR_FILENO) == 1), start_(absl::Now()) {}
  ~ProgressReporter() { EndLine(); }

  // The terminal's width (80 when it does not say): asked at every redraw,
  // so a resized window is followed.
  static int Columns() {
    winsize size{};
    if (ioctl(STDERR_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) {
      return size.ws_col;
    }
    return 80;
  }

  void Update(const v1::Backfill& job) {
    double elapsed = absl::ToDoubleSeconds(absl::Now() - start_);
    if (tty_) {
      // The current step on a line of its own above the bar, each time the
      // job moves to another state.
      if (job.state() != last_state_ && !job.current_step().empty()) {
        std::cerr << "\r" << cli::TerminalText(job.current_step())
                  << "\033[K\n";
        last_state_ = job.state();
      }
      std::cerr << "\r"
                << cli::FormatProgressBarFitting(job, elapsed, Columns())
                << "\033[K" << std::flush;
      bar_drawn_ = true;
      return;
    }
    const auto& counts = job.partitions();
    int decile = counts.total() > 0
                     ? static_cast<int>(10 * cli::DonePartitions(counts) /
                                        counts.total())
                     : 0;
    if (job.state() != last_state_ || decile != last_decile_) {
      std::cerr << cli::FormatProgressLine(job, elapsed) << std::endl;
      last_state_ = job.state();
      last_decile_ = decile;
    }
  }

  // Ends the bar's line so the next message starts on a fresh line.
  void EndLine() {
    if (bar_drawn_) std::cerr << std::endl;
    bar_drawn_ = false;
  }

 private:
  bool tty_;
  absl::Time start_;
  bool bar_drawn_ = false;
  v1::BackfillState last_state_ = v1::BACKFILL_STATE_UNSPECIFIED;
  int last_decile_ = -1;
};

// Ctrl-C while following: the job keeps running on the server; say how to
// find it again. Async-signal-safe (write and _exit only).
char interrupt_message[256] = "\nbackfillctl: interrupted\n";

void OnInterrupt(int) {
  ssize_t ignored =
      write(STDERR_FILENO, interrupt_message, strlen(interrupt_message));
  (void)ignored;
  _exit(kExitInterrupted);
}

void InstallInterruptHandler(const std::string& id) {
  const std::string safe_id = cli::TerminalText(id);
  std::string message =
      absl::StrCat("\nbackfillctl: stopped following; job ", safe_id,
                   " keeps running (backfillctl watch ", safe_id, ")\n");
  if (message.size() < sizeof(interrupt_message)) {
    memcpy(interrupt_message, message.c_str(), message.size() + 1);
  }
  struct sigaction action = {};
  action.sa_handler = OnInterrupt;
  sigaction(SIGINT, &action, nullptr);
}

}  // namespace

absl::StatusOr<v1::Backfill> JobFollower::Follow(const std::string& id,
                                                 v1::Backfill latest) {
  InstallInterruptHandler(id);
  ProgressReporter progress;
  // A job waiting for an operator (AWAITING_APPROVAL) ends the follow too:
  // nothing happens until someone decides.
  auto settled = [](const v1::Backfill& job) {
    return cli::IsTerminal(job.state()) || cli::WaitsForOperator(job.state());
  };
  if (!latest.id().empty()) progress.Update(latest);
  if (settled(latest)) return latest;

  absl::Status stream = client_->Watch(id, [&](const v1::Backfill& job) {
    latest = job;
    progress.Update(job);
    return !settled(job);
  });
  if (settled(latest)) return latest;
  // The stream failed or ended early. Without having seen the job at all,
  // its error is the answer (unknown id, server down).
  if (latest.id().empty() &&
      stream.code() != absl::StatusCode::kUnimplemented) {
    if (stream.ok()) {
      return absl::InternalError("watch stream ended without any update");
    }
    return stream;
  }
  progress.EndLine();
  std::cerr << "backfillctl: watch stream ended ("
            << (stream.ok() ? "OK" : absl::StatusCodeToString(stream.code()))
            << "); polling every " << absl::FormatDuration(kPollInterval)
            << std::endl;

  absl::Time last_success = absl::Now();
  while (true) {
    absl::SleepFor(kPollInterval);
    absl::StatusOr<v1::Backfill> job = client_->Get(id);
    if (!job.ok()) {
      bool transient =
          job.status().code() == absl::StatusCode::kUnavailable ||
          job.status().code() == absl::StatusCode::kDeadlineExceeded;
      if (!transient || latest.id().empty() ||
          absl::Now() - last_success > kPollOutageTolerance) {
        return job.status();
      }
      continue;
    }
    last_success = absl::Now();
    latest = *job;
    progress.Update(latest);
    if (settled(latest)) return latest;
  }
}

int JobFollower::Finish(absl::StatusOr<v1::Backfill> final_job) {
  signal(SIGINT, SIG_DFL);
  if (!final_job.ok()) return output_->RpcError(final_job.status());
  // Watch updates leave out the plan's partition lists: print the whole job.
  if (absl::StatusOr<v1::Backfill> whole = client_->Get(final_job->id());
      whole.ok()) {
    final_job = *std::move(whole);
  }
  int code = output_->Print(*final_job, cli::FormatBackfill(*final_job));
  if (code != kExitOk) return code;
  if (final_job->state() == v1::BACKFILL_STATE_SUCCEEDED) return kExitOk;
  if (cli::WaitsForOperator(final_job->state())) {
    const std::string id = cli::TerminalText(final_job->id());
    std::cerr << "backfillctl: job " << id
              << " is AWAITING_APPROVAL: nothing is published until it is "
                 "approved. Read its diff (backfillctl diff "
              << id << "), then backfillctl approve " << id
              << " --reason \"...\" (or backfillctl cancel " << id << ")"
              << std::endl;
    return kExitFailure;
  }
  std::cerr << "backfillctl: job " << cli::TerminalText(final_job->id())
            << (cli::IsTerminal(final_job->state()) ? " ended " : " is ")
            << cli::StateName(final_job->state()) << std::endl;
  return kExitFailure;
}

}  // namespace cli
}  // namespace backfill
