#include "tests/testing/fault_vfs.h"

#include <sqlite3.h>
#include <sys/stat.h>
#include <time.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/base/const_init.h"
#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "core/base/sv.h"
#include "storage/sqlite/sqlite_db.h"

namespace backfill::sqlite {
namespace {

// ---------------------------------------------------------------------------
// Fault state per database basename.

enum FaultBit : uint32_t {
  kFullBit = 1u << 0,
  kReadBit = 1u << 1,
  kWriteBit = 1u << 2,
  kFsyncBit = 1u << 3,
};

enum class FileKind { kDatabase, kWal, kJournal };

// Indexes into Slot::counts.
enum Counter {
  kCountFull,
  kCountRead,
  kCountWrite,
  kCountFsync,
  kCountOnDatabase,
  kCountOnWal,
  kCountOnJournal,
  kNumCounters,
};

uint32_t BitsOf(const Fault& fault) {
  uint32_t bits = 0;
  if (fault.full_after_bytes >= 0) bits |= kFullBit;
  if (fault.read_error) bits |= kReadBit;
  if (fault.write_error) bits |= kWriteBit;
  if (fault.fsync_error) bits |= kFsyncBit;
  return bits;
}

// The live fault state of one database basename. Slots are created on first
// use and never destroyed, so open files may keep a plain pointer to theirs.
// The I/O paths read only the atomics; `fault` is the Fault as set, for Get().
struct Slot {
  std::atomic<uint32_t> bits{0};
  std::atomic<int64_t> budget{0};  // bytes left while kFullBit is set
  std::array<std::atomic<int64_t>, kNumCounters> counts{};
  Fault fault;  // guarded by Registry::mu_

  // Takes `bytes` from the disk-full budget. False when they do not fit; the
  // budget is then exhausted for good (the disk is full).
  bool Consume(int64_t bytes) {
    int64_t left = budget.load(std::memory_order_relaxed);
    while (true) {
      if (left < bytes) {
        budget.store(0, std::memory_order_relaxed);
        return false;
      }
      if (budget.compare_exchange_weak(left, left - bytes,
                                       std::memory_order_relaxed)) {
        return true;
      }
    }
  }
};

absl::Status ValidateName(std::string_view name) {
  if (name.empty()) {
    return absl::InvalidArgumentError("empty database file name");
  }
  if (name.find('/') != std::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", Sv(name),
                     "\" is a path; name the database file by its basename "
                     "(e.g. \"state.db\")"));
  }
  for (absl::string_view suffix : {"-wal", "-journal", "-shm"}) {
    if (absl::EndsWith(Sv(name), suffix)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "\"", Sv(name), "\" names a ", suffix,
          " file; name the database file, whose faults cover its -wal and "
          "-journal"));
    }
  }
  return absl::OkStatus();
}

class Registry {
 public:
  // The slot of `name`; with create=false nullptr when there is none.
  Slot* Find(std::string_view name, bool create) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return FindLocked(name, create);
  }

  void Set(std::string_view name, const Fault& fault) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    ApplyLocked(FindLocked(name, /*create=*/true), fault);
  }

  Fault Get(std::string_view name) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    Slot* slot = FindLocked(name, /*create=*/false);
    return slot != nullptr ? slot->fault : Fault{};
  }

  // Sets exactly the faults in `faults`; every other database has none.
  void ReplaceAll(const absl::flat_hash_map<std::string, Fault>& faults)
      ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    for (auto& [name, slot] : slots_) {
      auto it = faults.find(name);
      ApplyLocked(slot.get(), it != faults.end() ? it->second : Fault{});
    }
    for (const auto& [name, fault] : faults) {
      ApplyLocked(FindLocked(name, /*create=*/true), fault);
    }
  }

  FaultCounters Counters(std::string_view name) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    FaultCounters out;
    if (Slot* slot = FindLocked(name, /*create=*/false)) Add(*slot, &out);
    return out;
  }

  FaultCounters Counters() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    FaultCounters out;
    for (const auto& entry : slots_) Add(*entry.second, &out);
    return out;
  }

  void ResetCounters() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    for (auto& entry : slots_) {
      for (auto& count : entry.second->counts) count.store(0);
    }
  }

 private:
  Slot* FindLocked(std::string_view name, bool create)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = slots_.find(Sv(name));
    if (it != slots_.end()) return it->second.get();
    if (!create) return nullptr;
    return slots_.emplace(std::string(name), std::make_unique<Slot>())
        .first->second.get();
  }

  static void ApplyLocked(Slot* slot, const Fault& fault) {
    slot->fault = fault;
    slot->budget.store(std::max<int64_t>(fault.full_after_bytes, 0),
                       std::memory_order_relaxed);
    // Release: an operation that sees the new bits sees the new budget.
    slot->bits.store(BitsOf(fault), std::memory_order_release);
  }

  static void Add(const Slot& slot, FaultCounters* out) {
    out->full += slot.counts[kCountFull].load();
    out->read_errors += slot.counts[kCountRead].load();
    out->write_errors += slot.counts[kCountWrite].load();
    out->fsync_errors += slot.counts[kCountFsync].load();
    out->on_database += slot.counts[kCountOnDatabase].load();
    out->on_wal += slot.counts[kCountOnWal].load();
    out->on_journal += slot.counts[kCountOnJournal].load();
  }

  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<Slot>> slots_
      ABSL_GUARDED_BY(mu_);
};

Registry& GetRegistry() {
  static Registry* const registry = new Registry;
  return *registry;
}

// ---------------------------------------------------------------------------
// Control file parsing.

// `where` prefixes the line number in errors ("line " or "PATH:").
absl::StatusOr<absl::flat_hash_map<std::string, Fault>> Parse(
    std::string_view text, std::string_view where) {
  constexpr char kWant[] =
      "want full, full-after BYTES, ioerr-read, ioerr-write, ioerr or "
      "ioerr-fsync";
  absl::flat_hash_map<std::string, Fault> out;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(Sv(text), '\n')) {
    ++line_number;
    auto error = [&](absl::string_view reason) {
      return absl::InvalidArgumentError(
          absl::StrCat(Sv(where), line_number, ": ", reason));
    };
    line = line.substr(0, line.find('#'));
    std::vector<absl::string_view> words =
        absl::StrSplit(line, absl::ByAnyChar(" \t\r\v\f"), absl::SkipEmpty());
    if (words.empty()) continue;
    const std::string name(words[0]);
    if (absl::Status valid = ValidateName(name); !valid.ok()) {
      return error(valid.message());
    }
    if (words.size() == 1) {
      return error(absl::StrCat("no fault for ", name, " (", kWant, ")"));
    }
    Fault fault;
    for (size_t i = 1; i < words.size(); ++i) {
      const absl::string_view word = words[i];
      if (word == "full") {
        fault.Merge(Fault::DiskFull());
      } else if (word == "full-after") {
        int64_t bytes = 0;
        if (i + 1 >= words.size() || !absl::SimpleAtoi(words[i + 1], &bytes) ||
            bytes < 0) {
          return error("full-after needs a number of bytes >= 0");
        }
        fault.Merge(Fault::DiskFullAfter(bytes));
        ++i;
      } else if (word == "ioerr-read") {
        fault.Merge(Fault::ReadError());
      } else if (word == "ioerr-write") {
        fault.Merge(Fault::WriteError());
      } else if (word == "ioerr") {
        fault.Merge(Fault::IoError());
      } else if (word == "ioerr-fsync") {
        fault.Merge(Fault::FsyncError());
      } else {
        return error(
            absl::StrCat("unknown fault \"", word, "\" (", kWant, ")"));
      }
    }
    out[name].Merge(fault);
  }
  return out;
}

// ---------------------------------------------------------------------------
// The control file named by BACKFILL_TEST_FAULTS.

int64_t RealtimeNanos() {
  timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  return int64_t{now.tv_sec} * 1000000000 + now.tv_nsec;
}

class ControlFile {
 public:
  // Reads the file again if it may have changed, and applies it. One
  // atomic load when no file is followed, else one stat(2) under a shared
  // lock (the content is read only when the stat or the racy window says
  // it may have changed).
  void Check() ABSL_LOCKS_EXCLUDED(mu_) {
    if (!active_.load(std::memory_order_acquire)) return;
    {
      absl::ReaderMutexLock lock(&mu_);
      if (path_.empty()) return;
      if (!racy_ && StatFile(path_) == key_) return;
    }
    absl::MutexLock lock(&mu_);
    if (path_.empty()) return;
    const Key key = StatFile(path_);
    if (key == key_ && !racy_) return;
    Refresh(key);
  }

  absl::Status Watch(const std::string& path) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (path.empty()) {
      active_.store(false, std::memory_order_release);
      path_.clear();
      content_.clear();
      status_ = absl::OkStatus();
      GetRegistry().ReplaceAll({});
      return absl::OkStatus();
    }
    std::error_code ec;
    std::filesystem::path absolute = std::filesystem::absolute(path, ec);
    const std::string file = ec ? path : absolute.string();
    const Key key = StatFile(file);
    const std::string content = key.exists ? ReadFile(file) : "";
    absl::StatusOr<absl::flat_hash_map<std::string, Fault>> faults =
        Parse(content, absl::StrCat(file, ":"));
    if (!faults.ok()) return faults.status();
    path_ = file;
    key_ = key;
    racy_ = IsRacy(key);
    content_ = content;
    status_ = absl::OkStatus();
    GetRegistry().ReplaceAll(*faults);
    active_.store(true, std::memory_order_release);
    return absl::OkStatus();
  }

  absl::Status status() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return status_;
  }

 private:
  // A file whose timestamps are younger than this may change again without a
  // visible change of its timestamps; its content is compared meanwhile.
  static constexpr int64_t kRacyWindow = 100 * 1000 * 1000;

  struct Key {
    bool exists = false;
    dev_t dev = 0;
    ino_t ino = 0;
    off_t size = 0;
    int64_t mtime = 0;
    int64_t ctime = 0;

    friend bool operator==(const Key& a, const Key& b) {
      return a.exists == b.exists && a.dev == b.dev && a.ino == b.ino &&
             a.size == b.size && a.mtime == b.mtime && a.ctime == b.ctime;
    }
  };

  static Key StatFile(const std::string& path) {
    Key key;
    struct stat st;
    if (stat(path.c_str(), &st) != 0) return key;
    key.exists = true;
    key.dev = st.st_dev;
    key.ino = st.st_ino;
    key.size = st.st_size;
    key.mtime = int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
    key.ctime = int64_t{st.st_ctim.tv_sec} * 1000000000 + st.st_ctim.tv_nsec;
    return key;
  }

  static bool IsRacy(const Key& key) {
    if (!key.exists) return false;
    return RealtimeNanos() - std::max(key.mtime, key.ctime) < kRacyWindow;
  }

  // The file's content; "" when it cannot be read (e.g. removed meanwhile).
  static std::string ReadFile(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return "";
    std::ostringstream content;
    content << in.rdbuf();
    return content.str();
  }

  void Refresh(const Key& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    key_ = key;
    racy_ = IsRacy(key);
    std::string content = key.exists ? ReadFile(path_) : "";
    if (content == content_) return;
    content_ = std::move(content);
    absl::StatusOr<absl::flat_hash_map<std::string, Fault>> faults =
        Parse(content_, absl::StrCat(path_, ":"));
    if (!faults.ok()) {
      status_ = faults.status();  // keep the faults as they were
      return;
    }
    status_ = absl::OkStatus();
    GetRegistry().ReplaceAll(*faults);
  }

  std::atomic<bool> active_{false};
  absl::Mutex mu_;
  std::string path_ ABSL_GUARDED_BY(mu_);
  Key key_ ABSL_GUARDED_BY(mu_);
  bool racy_ ABSL_GUARDED_BY(mu_) = false;
  std::string content_ ABSL_GUARDED_BY(mu_);  // last content seen
  absl::Status status_ ABSL_GUARDED_BY(mu_);
};

ControlFile& GetControlFile() {
  static ControlFile* const control = new ControlFile;
  return *control;
}

// ---------------------------------------------------------------------------
// The VFS.

// The VFS being wrapped, set once by Install() before the shim is
// registered, and the shim itself (SQLite keeps a pointer to it).
sqlite3_vfs* g_root = nullptr;
sqlite3_vfs g_vfs;
std::atomic<bool> g_installed{false};
ABSL_CONST_INIT absl::Mutex g_install_mu(absl::kConstInit);

// What SQLite allocates for a file opened through the shim: this header,
// then (8-aligned) the wrapped VFS's own file object.
struct FaultFile {
  sqlite3_file base;
  sqlite3_file* real;  // the wrapped VFS's file, inside this allocation
  Slot* slot;          // nullptr: never faulted (temp files, unknown kinds)
  FileKind kind;
};
constexpr int kHeaderSize =
    static_cast<int>((sizeof(FaultFile) + 7) & ~size_t{7});

FaultFile* Self(sqlite3_file* file) {
  return reinterpret_cast<FaultFile*>(file);
}
sqlite3_file* Real(sqlite3_file* file) { return Self(file)->real; }

int Fail(FaultFile* file, Counter counter, int rc) {
  Slot* slot = file->slot;
  slot->counts[counter].fetch_add(1, std::memory_order_relaxed);
  Counter where = kCountOnDatabase;
  if (file->kind == FileKind::kWal) where = kCountOnWal;
  if (file->kind == FileKind::kJournal) where = kCountOnJournal;
  slot->counts[where].fetch_add(1, std::memory_order_relaxed);
  return rc;
}

uint32_t BitsFor(const FaultFile* file) {
  return file->slot != nullptr
             ? file->slot->bits.load(std::memory_order_acquire)
             : 0;
}

int FileClose(sqlite3_file* file) {
  sqlite3_file* real = Real(file);
  int rc = SQLITE_OK;
  if (real->pMethods != nullptr) rc = real->pMethods->xClose(real);
  real->pMethods = nullptr;
  return rc;
}

int FileRead(sqlite3_file* file, void* buffer, int amount,
             sqlite3_int64 offset) {
  GetControlFile().Check();
  FaultFile* self = Self(file);
  if (BitsFor(self) & kReadBit) {
    return Fail(self, kCountRead, SQLITE_IOERR_READ);
  }
  return self->real->pMethods->xRead(self->real, buffer, amount, offset);
}

int FileWrite(sqlite3_file* file, const void* buffer, int amount,
              sqlite3_int64 offset) {
  GetControlFile().Check();
  FaultFile* self = Self(file);
  const uint32_t bits = BitsFor(self);
  if (bits & kWriteBit) return Fail(self, kCountWrite, SQLITE_IOERR_WRITE);
  if ((bits & kFullBit) && !self->slot->Consume(amount)) {
    return Fail(self, kCountFull, SQLITE_FULL);
  }
  return self->real->pMethods->xWrite(self->real, buffer, amount, offset);
}

int FileTruncate(sqlite3_file* file, sqlite3_int64 size) {
  GetControlFile().Check();
  FaultFile* self = Self(file);
  const uint32_t bits = BitsFor(self);
  if (bits & kWriteBit) return Fail(self, kCountWrite, SQLITE_IOERR_TRUNCATE);
  if (bits & kFullBit) {
    sqlite3_int64 current = 0;
    if (self->real->pMethods->xFileSize(self->real, &current) == SQLITE_OK &&
        size > current && !self->slot->Consume(size - current)) {
      return Fail(self, kCountFull, SQLITE_FULL);
    }
  }
  return self->real->pMethods->xTruncate(self->real, size);
}

int FileSync(sqlite3_file* file, int flags) {
  GetControlFile().Check();
  FaultFile* self = Self(file);
  if (BitsFor(self) & kFsyncBit) {
    return Fail(self, kCountFsync, SQLITE_IOERR_FSYNC);
  }
  return self->real->pMethods->xSync(self->real, flags);
}

int FileSize(sqlite3_file* file, sqlite3_int64* size) {
  sqlite3_file* real = Real(file);
  return real->pMethods->xFileSize(real, size);
}

int FileLock(sqlite3_file* file, int level) {
  sqlite3_file* real = Real(file);
  return real->pMethods->xLock(real, level);
}

int FileUnlock(sqlite3_file* file, int level) {
  sqlite3_file* real = Real(file);
  return real->pMethods->xUnlock(real, level);
}

int FileCheckReservedLock(sqlite3_file* file, int* result) {
  sqlite3_file* real = Real(file);
  return real->pMethods->xCheckReservedLock(real, result);
}

int FileControl(sqlite3_file* file, int op, void* arg) {
  FaultFile* self = Self(file);
  // Preallocation would grow the file without xWrite; it is only a hint,
  // so it is dropped while writes are to fail.
  if (op == SQLITE_FCNTL_SIZE_HINT &&
      (BitsFor(self) & (kFullBit | kWriteBit))) {
    return SQLITE_OK;
  }
  return self->real->pMethods->xFileControl(self->real, op, arg);
}

int FileSectorSize(sqlite3_file* file) {
  sqlite3_file* real = Real(file);
  return real->pMethods->xSectorSize(real);
}

int FileDeviceCharacteristics(sqlite3_file* file) {
  sqlite3_file* real = Real(file);
  return real->pMethods->xDeviceCharacteristics(real);
}

int FileShmMap(sqlite3_file* file, int region, int size, int extend,
               void volatile** out) {
  sqlite3_file* real = Real(file);
  return real->pMethods->xShmMap(real, region, size, extend, out);
}

int FileShmLock(sqlite3_file* file, int offset, int n, int flags) {
  sqlite3_file* real = Real(file);
  return real->pMethods->xShmLock(real, offset, n, flags);
}

void FileShmBarrier(sqlite3_file* file) {
  sqlite3_file* real = Real(file);
  real->pMethods->xShmBarrier(real);
}

int FileShmUnmap(sqlite3_file* file, int delete_flag) {
  sqlite3_file* real = Real(file);
  return real->pMethods->xShmUnmap(real, delete_flag);
}

int FileFetch(sqlite3_file* file, sqlite3_int64 offset, int amount,
              void** out) {
  FaultFile* self = Self(file);
  // No mapping while reads fail: SQLite then reads through xRead.
  if ((BitsFor(self) & kReadBit) || self->real->pMethods->xFetch == nullptr) {
    *out = nullptr;
    return SQLITE_OK;
  }
  return self->real->pMethods->xFetch(self->real, offset, amount, out);
}

int FileUnfetch(sqlite3_file* file, sqlite3_int64 offset, void* page) {
  sqlite3_file* real = Real(file);
  if (real->pMethods->xUnfetch == nullptr) return SQLITE_OK;
  return real->pMethods->xUnfetch(real, offset, page);
}

// The io methods, with the version of the wrapped file's methods: SQLite
// decides from iVersion and from xShmMap being set whether it may use WAL
// and memory-mapped I/O, so the shim must claim neither more nor less.
constexpr sqlite3_io_methods MakeMethods(int version, bool shm) {
  sqlite3_io_methods m{};
  m.iVersion = version;
  m.xClose = FileClose;
  m.xRead = FileRead;
  m.xWrite = FileWrite;
  m.xTruncate = FileTruncate;
  m.xSync = FileSync;
  m.xFileSize = FileSize;
  m.xLock = FileLock;
  m.xUnlock = FileUnlock;
  m.xCheckReservedLock = FileCheckReservedLock;
  m.xFileControl = FileControl;
  m.xSectorSize = FileSectorSize;
  m.xDeviceCharacteristics = FileDeviceCharacteristics;
  if (version >= 2 && shm) {
    m.xShmMap = FileShmMap;
    m.xShmLock = FileShmLock;
    m.xShmBarrier = FileShmBarrier;
    m.xShmUnmap = FileShmUnmap;
  }
  if (version >= 3) {
    m.xFetch = FileFetch;
    m.xUnfetch = FileUnfetch;
  }
  return m;
}

constexpr sqlite3_io_methods kMethodsV1 = MakeMethods(1, false);
constexpr sqlite3_io_methods kMethodsV2 = MakeMethods(2, true);
constexpr sqlite3_io_methods kMethodsV2NoShm = MakeMethods(2, false);
constexpr sqlite3_io_methods kMethodsV3 = MakeMethods(3, true);
constexpr sqlite3_io_methods kMethodsV3NoShm = MakeMethods(3, false);

const sqlite3_io_methods* MethodsFor(const sqlite3_io_methods* real) {
  if (real->iVersion <= 1) return &kMethodsV1;
  const bool shm = real->xShmMap != nullptr;
  if (real->iVersion == 2) return shm ? &kMethodsV2 : &kMethodsV2NoShm;
  return shm ? &kMethodsV3 : &kMethodsV3NoShm;
}

// The basename of the database that a file opened with `flags` belongs to,
// and the kind of file; false for files that are never faulted.
bool DatabaseOf(const char* name, int flags, std::string* basename,
                FileKind* kind) {
  if (name == nullptr) return false;
  std::string_view path;
  if (flags & SQLITE_OPEN_MAIN_DB) {
    path = name;
    *kind = FileKind::kDatabase;
  } else if (flags & (SQLITE_OPEN_WAL | SQLITE_OPEN_MAIN_JOURNAL)) {
    // SQLite passes journal and WAL names from which the database name can
    // be recovered (this is what sqlite3_filename_database is for).
    const char* database = sqlite3_filename_database(name);
    if (database == nullptr) return false;
    path = database;
    *kind = (flags & SQLITE_OPEN_WAL) ? FileKind::kWal : FileKind::kJournal;
  } else if (flags & SQLITE_OPEN_SUPER_JOURNAL) {
    // "<main database>-mjXXXXXXXXX".
    path = name;
    const size_t mj = path.rfind("-mj");
    if (mj == std::string_view::npos) return false;
    path = path.substr(0, mj);
    *kind = FileKind::kJournal;
  } else {
    return false;
  }
  const size_t slash = path.rfind('/');
  if (slash != std::string_view::npos) path = path.substr(slash + 1);
  if (path.empty()) return false;
  *basename = std::string(path);
  return true;
}

int VfsOpen(sqlite3_vfs* vfs, sqlite3_filename name, sqlite3_file* file,
            int flags, int* out_flags) {
  GetControlFile().Check();
  FaultFile* self = Self(file);
  self->base.pMethods = nullptr;
  self->real = reinterpret_cast<sqlite3_file*>(reinterpret_cast<char*>(file) +
                                               kHeaderSize);
  self->real->pMethods = nullptr;
  self->slot = nullptr;
  self->kind = FileKind::kDatabase;
  const int rc = g_root->xOpen(g_root, name, self->real, flags, out_flags);
  // SQLite calls xClose whenever pMethods is set, also after a failed open.
  if (self->real->pMethods != nullptr) {
    self->base.pMethods = MethodsFor(self->real->pMethods);
  }
  std::string basename;
  if (rc == SQLITE_OK && DatabaseOf(name, flags, &basename, &self->kind)) {
    self->slot = GetRegistry().Find(basename, /*create=*/true);
  }
  return rc;
}

int VfsDelete(sqlite3_vfs*, const char* name, int sync_dir) {
  return g_root->xDelete(g_root, name, sync_dir);
}

int VfsAccess(sqlite3_vfs*, const char* name, int flags, int* result) {
  return g_root->xAccess(g_root, name, flags, result);
}

int VfsFullPathname(sqlite3_vfs*, const char* name, int size, char* out) {
  return g_root->xFullPathname(g_root, name, size, out);
}

void* VfsDlOpen(sqlite3_vfs*, const char* name) {
  return g_root->xDlOpen(g_root, name);
}

void VfsDlError(sqlite3_vfs*, int size, char* out) {
  g_root->xDlError(g_root, size, out);
}

using DlSym = void (*)(void);
DlSym VfsDlSym(sqlite3_vfs*, void* handle, const char* symbol) {
  return g_root->xDlSym(g_root, handle, symbol);
}

void VfsDlClose(sqlite3_vfs*, void* handle) {
  g_root->xDlClose(g_root, handle);
}

int VfsRandomness(sqlite3_vfs*, int size, char* out) {
  return g_root->xRandomness(g_root, size, out);
}

int VfsSleep(sqlite3_vfs*, int microseconds) {
  return g_root->xSleep(g_root, microseconds);
}

int VfsCurrentTime(sqlite3_vfs*, double* out) {
  return g_root->xCurrentTime(g_root, out);
}

int VfsGetLastError(sqlite3_vfs*, int size, char* out) {
  return g_root->xGetLastError(g_root, size, out);
}

int VfsCurrentTimeInt64(sqlite3_vfs*, sqlite3_int64* out) {
  return g_root->xCurrentTimeInt64(g_root, out);
}

int VfsSetSystemCall(sqlite3_vfs*, const char* name, sqlite3_syscall_ptr call) {
  return g_root->xSetSystemCall(g_root, name, call);
}

sqlite3_syscall_ptr VfsGetSystemCall(sqlite3_vfs*, const char* name) {
  return g_root->xGetSystemCall(g_root, name);
}

const char* VfsNextSystemCall(sqlite3_vfs*, const char* name) {
  return g_root->xNextSystemCall(g_root, name);
}

}  // namespace

// ---------------------------------------------------------------------------
// Fault

Fault Fault::DiskFullAfter(int64_t bytes) {
  Fault fault;
  fault.full_after_bytes = std::max<int64_t>(bytes, 0);
  return fault;
}

Fault Fault::ReadError() {
  Fault fault;
  fault.read_error = true;
  return fault;
}

Fault Fault::WriteError() {
  Fault fault;
  fault.write_error = true;
  return fault;
}

Fault Fault::IoError() {
  Fault fault;
  fault.read_error = true;
  fault.write_error = true;
  return fault;
}

Fault Fault::FsyncError() {
  Fault fault;
  fault.fsync_error = true;
  return fault;
}

void Fault::Merge(const Fault& other) {
  if (other.full_after_bytes >= 0) {
    full_after_bytes = full_after_bytes >= 0
                           ? std::min(full_after_bytes, other.full_after_bytes)
                           : other.full_after_bytes;
  }
  read_error = read_error || other.read_error;
  write_error = write_error || other.write_error;
  fsync_error = fsync_error || other.fsync_error;
}

// ---------------------------------------------------------------------------
// FaultVfs

absl::Status FaultVfs::Install() {
  absl::MutexLock lock(&g_install_mu);
  if (g_installed.load(std::memory_order_acquire)) return absl::OkStatus();
  sqlite::ConfigureLibrary();
  int rc = sqlite3_initialize();
  if (rc != SQLITE_OK) {
    return absl::InternalError(
        absl::StrCat("fault vfs: sqlite3_initialize: ", sqlite3_errstr(rc)));
  }
  sqlite3_vfs* root = sqlite3_vfs_find(nullptr);
  if (root == nullptr) {
    return absl::FailedPreconditionError("fault vfs: SQLite has no VFS");
  }
  g_root = root;
  g_vfs = sqlite3_vfs{};
  g_vfs.iVersion = std::min(root->iVersion, 3);
  g_vfs.szOsFile = kHeaderSize + root->szOsFile;
  g_vfs.mxPathname = root->mxPathname;
  g_vfs.zName = kName;
  g_vfs.xOpen = VfsOpen;
  g_vfs.xDelete = VfsDelete;
  g_vfs.xAccess = VfsAccess;
  g_vfs.xFullPathname = VfsFullPathname;
  g_vfs.xDlOpen = root->xDlOpen != nullptr ? VfsDlOpen : nullptr;
  g_vfs.xDlError = root->xDlError != nullptr ? VfsDlError : nullptr;
  g_vfs.xDlSym = root->xDlSym != nullptr ? VfsDlSym : nullptr;
  g_vfs.xDlClose = root->xDlClose != nullptr ? VfsDlClose : nullptr;
  g_vfs.xRandomness = VfsRandomness;
  g_vfs.xSleep = VfsSleep;
  g_vfs.xCurrentTime = VfsCurrentTime;
  g_vfs.xGetLastError =
      root->xGetLastError != nullptr ? VfsGetLastError : nullptr;
  if (root->iVersion >= 2 && root->xCurrentTimeInt64 != nullptr) {
    g_vfs.xCurrentTimeInt64 = VfsCurrentTimeInt64;
  }
  if (root->iVersion >= 3) {
    if (root->xSetSystemCall != nullptr)
      g_vfs.xSetSystemCall = VfsSetSystemCall;
    if (root->xGetSystemCall != nullptr)
      g_vfs.xGetSystemCall = VfsGetSystemCall;
    if (root->xNextSystemCall != nullptr) {
      g_vfs.xNextSystemCall = VfsNextSystemCall;
    }
  }
  rc = sqlite3_vfs_register(&g_vfs, /*makeDflt=*/1);
  if (rc != SQLITE_OK) {
    return absl::InternalError(
        absl::StrCat("fault vfs: sqlite3_vfs_register: ", sqlite3_errstr(rc)));
  }
  g_installed.store(true, std::memory_order_release);
  return absl::OkStatus();
}

bool FaultVfs::Installed() {
  return g_installed.load(std::memory_order_acquire);
}

absl::Status FaultVfs::Set(const std::string& file_basename,
                           const Fault& fault) {
  if (absl::Status valid = ValidateName(file_basename); !valid.ok()) {
    return valid;
  }
  GetRegistry().Set(file_basename, fault);
  return absl::OkStatus();
}

void FaultVfs::Clear(const std::string& file_basename) {
  if (GetRegistry().Find(file_basename, /*create=*/false) == nullptr) return;
  GetRegistry().Set(file_basename, Fault{});
}

void FaultVfs::ClearAll() { GetRegistry().ReplaceAll({}); }

Fault FaultVfs::Get(const std::string& file_basename) {
  return GetRegistry().Get(file_basename);
}

FaultCounters FaultVfs::Counters(const std::string& file_basename) {
  return GetRegistry().Counters(file_basename);
}

FaultCounters FaultVfs::Counters() { return GetRegistry().Counters(); }

void FaultVfs::ResetCounters() { GetRegistry().ResetCounters(); }

absl::Status FaultVfs::WatchControlFile(const std::string& path) {
  if (!path.empty()) {
    if (absl::Status installed = Install(); !installed.ok()) return installed;
  }
  return GetControlFile().Watch(path);
}

absl::Status FaultVfs::ControlFileStatus() { return GetControlFile().status(); }

absl::Status InstallFaultVfsFromEnvironment() {
  const char* path = std::getenv(kFaultControlEnv);
  if (path == nullptr || *path == '\0') return absl::OkStatus();
  return FaultVfs::WatchControlFile(path);
}

absl::StatusOr<absl::flat_hash_map<std::string, Fault>> ParseFaultControl(
    std::string_view text) {
  return Parse(text, "line ");
}

}  // namespace backfill::sqlite
