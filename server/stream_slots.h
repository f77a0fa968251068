// StreamSlots: how many long-lived calls (e.g. WatchBackfill streams) each
// caller has open at once, bounded by a per-caller limit. A caller is a key
// the server chooses (the authenticated principal, else the peer's host).
//
// TryAcquire() hands out a Slot, a move-only RAII handle that gives its
// place back when it is destroyed, however the call it guards ends (return,
// error, cancellation, exception); or nullopt when the caller already holds
// `limit` slots, and then nothing is counted. A key's count is dropped
// when it reaches 0, so the table only holds callers with open calls.
//
// Owns its counts; a Slot points at the StreamSlots it came from, which
// must outlive it. Thread-safe: every method may be called concurrently,
// and Slots may be released on any thread.

#ifndef BACKFILL_SERVER_STREAM_SLOTS_H_
#define BACKFILL_SERVER_STREAM_SLOTS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/synchronization/mutex.h"

namespace backfill {

class StreamSlots {
 public:
  // One held place; releases it on destruction. Move-only.
  class Slot {
   public:
    Slot(Slot&& other) noexcept;
    Slot& operator=(Slot&& other) noexcept;
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    ~Slot();

    const std::string& key() const { return key_; }

   private:
    friend class StreamSlots;
    Slot(StreamSlots* owner, std::string key)
        : owner_(owner), key_(std::move(key)) {}
    void Release();

    StreamSlots* owner_ = nullptr;  // null once moved from or released
    std::string key_;
  };

  // `limit`: slots per key, at least 1.
  explicit StreamSlots(int64_t limit);

  StreamSlots(const StreamSlots&) = delete;
  StreamSlots& operator=(const StreamSlots&) = delete;

  // A slot for `key`, or nullopt when `key` holds `limit()` already.
  std::optional<Slot> TryAcquire(const std::string& key);

  // How many slots `key` holds now.
  int64_t InUse(const std::string& key) const;

  int64_t limit() const { return limit_; }

 private:
  void Release(const std::string& key);

  const int64_t limit_;
  mutable absl::Mutex mu_;
  std::map<std::string, int64_t> in_use_ ABSL_GUARDED_BY(mu_);
};

}  // namespace backfill

#endif  // BACKFILL_SERVER_STREAM_SLOTS_H_
