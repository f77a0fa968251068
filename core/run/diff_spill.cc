#include "core/run/diff_spill.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"

namespace backfill {
namespace {

// A page's encoding: the count of its partitions, then each partition's
// fields in PartitionDiff's order. Unsigned numbers and sizes are varints,
// signed ones varints of their two's complement, doubles their 8 bytes,
// strings their size and bytes. The file is this process's alone, so
// the byte order is the machine's.

void PutVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

void PutInt(int64_t v, std::string* out) {
  PutVarint(static_cast<uint64_t>(v), out);
}

void PutDouble(double v, std::string* out) {
  char bytes[sizeof v];
  std::memcpy(bytes, &v, sizeof v);
  out->append(bytes, sizeof v);
}

void PutString(const std::string& s, std::string* out) {
  PutVarint(s.size(), out);
  out->append(s);
}

void PutStrings(const std::vector<std::string>& values, std::string* out) {
  PutVarint(values.size(), out);
  for (const std::string& v : values) PutString(v, out);
}

void PutPartition(const PartitionDiff& p, std::string* out) {
  PutString(p.dataset, out);
  PutString(p.partition, out);
  for (int64_t n : {p.rows_before, p.rows_after, p.added, p.removed, p.changed,
                    p.unchanged}) {
    PutInt(n, out);
  }
  PutVarint(p.measures.size(), out);
  for (const MeasureTotals& m : p.measures) {
    PutString(m.column, out);
    PutDouble(m.before, out);
    PutDouble(m.after, out);
  }
  PutVarint(p.samples.size(), out);
  for (const DiffSample& s : p.samples) {
    PutVarint(static_cast<uint64_t>(s.change), out);
    PutStrings(s.key, out);
    PutStrings(s.before, out);
    PutStrings(s.after, out);
  }
  PutString(p.error, out);
}

// Reads what the Put functions wrote, from the front of `in`; false once
// `in` ends too soon.
class Decoder {
 public:
  explicit Decoder(std::string_view in) : in_(in) {}

  bool Varint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (in_.empty()) return false;
      const auto byte = static_cast<unsigned char>(in_.front());
      in_.remove_prefix(1);
      *v |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return true;
    }
    return false;
  }

  bool Int(int64_t* v) {
    uint64_t u = 0;
    if (!Varint(&u)) return false;
    *v = static_cast<int64_t>(u);
    return true;
  }

  bool Double(double* v) {
    if (in_.size() < sizeof *v) return false;
    std::memcpy(v, in_.data(), sizeof *v);
    in_.remove_prefix(sizeof *v);
    return true;
  }

  bool String(std::string* s) {
    uint64_t size = 0;
    if (!Varint(&size) || size > in_.size()) return false;
    s->assign(in_.data(), size);
    in_.remove_prefix(size);
    return true;
  }

  bool Strings(std::vector<std::string>* values) {
    uint64_t n = 0;
    if (!Varint(&n) || n > in_.size()) return false;
    values->resize(n);
    for (std::string& v : *values) {
      if (!String(&v)) return false;
    }
    return true;
  }

  bool Partition(PartitionDiff* p) {
    if (!String(&p->dataset) || !String(&p->partition)) return false;
    for (int64_t* n : {&p->rows_before, &p->rows_after, &p->added, &p->removed,
                       &p->changed, &p->unchanged}) {
      if (!Int(n)) return false;
    }
    uint64_t n = 0;
    if (!Varint(&n) || n > in_.size()) return false;
    p->measures.resize(n);
    for (MeasureTotals& m : p->measures) {
      if (!String(&m.column) || !Double(&m.before) || !Double(&m.after)) {
        return false;
      }
    }
    if (!Varint(&n) || n > in_.size()) return false;
    p->samples.resize(n);
    for (DiffSample& s : p->samples) {
      uint64_t change = 0;
      if (!Varint(&change) ||
          change > static_cast<uint64_t>(DiffChange::kChanged)) {
        return false;
      }
      s.change = static_cast<DiffChange>(change);
      if (!Strings(&s.key) || !Strings(&s.before) || !Strings(&s.after)) {
        return false;
      }
    }
    return String(&p->error);
  }

  bool empty() const { return in_.empty(); }
  size_t left() const { return in_.size(); }

 private:
  std::string_view in_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<DiffSpill>> DiffSpill::Create(
    const std::string& dir) {
  std::string where = dir;
  if (where.empty()) {
    const char* tmp = getenv("TMPDIR");
    where = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  }
  std::string path = absl::StrCat(where, "/backfill-diff-XXXXXX");
  const int fd = mkostemp(path.data(), O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    const std::string message =
        absl::StrCat("cannot make the diff's spill file in ", where, ": ",
                     std::strerror(err));
    if (err == ENOSPC || err == EDQUOT) {
      return absl::ResourceExhaustedError(message);
    }
    if (err == EIO) return absl::UnavailableError(message);
    return absl::FailedPreconditionError(message);
  }
  // Unnamed from the start: nothing is left behind, whatever happens.
  unlink(path.c_str());
  return std::unique_ptr<DiffSpill>(new DiffSpill(fd, where));
}

DiffSpill::~DiffSpill() { close(fd_); }

absl::Status DiffSpill::Failed(const char* what, int err) const {
  const std::string message = absl::StrCat(what, " the diff's spill file in ",
                                           dir_, ": ", std::strerror(err));
  if (err == ENOSPC || err == EDQUOT) {
    return absl::ResourceExhaustedError(message);
  }
  return absl::UnavailableError(message);
}

absl::Status DiffSpill::Put(size_t index, size_t dataset,
                            const std::vector<PartitionDiff>& partitions) {
  std::string page;
  PutVarint(partitions.size(), &page);
  for (const PartitionDiff& p : partitions) PutPartition(p, &page);

  absl::MutexLock lock(&mu_);
  if (index >= pages_.size()) pages_.resize(index + 1);
  Extent& extent = pages_[index];
  if (extent.offset >= 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("page ", index, " of a diff was set aside twice"));
  }
  const int64_t offset = end_;
  for (size_t done = 0; done < page.size();) {
    const ssize_t n = pwrite(fd_, page.data() + done, page.size() - done,
                             static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Failed("cannot write", errno);
    }
    done += static_cast<size_t>(n);
  }
  end_ += static_cast<int64_t>(page.size());
  extent.offset = offset;
  extent.size = static_cast<int64_t>(page.size());
  extent.dataset = dataset;
  return absl::OkStatus();
}

absl::Status DiffSpill::Rewind() {
  next_ = 0;
  return absl::OkStatus();
}

absl::StatusOr<bool> DiffSpill::Next(size_t* dataset,
                                     std::vector<PartitionDiff>* partitions) {
  Extent extent;
  {
    absl::MutexLock lock(&mu_);
    while (next_ < pages_.size() && pages_[next_].offset < 0) ++next_;
    if (next_ >= pages_.size()) return false;
    extent = pages_[next_];
  }
  std::string page(static_cast<size_t>(extent.size), '\0');
  for (size_t done = 0; done < page.size();) {
    const ssize_t n = pread(fd_, page.data() + done, page.size() - done,
                            static_cast<off_t>(extent.offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Failed("cannot read", errno);
    if (n == 0) return Failed("cannot read", EIO);  // shorter than written
    done += static_cast<size_t>(n);
  }
  Decoder in(page);
  uint64_t count = 0;
  bool ok = in.Varint(&count) && count <= in.left();
  if (ok) {
    partitions->resize(count);
    for (PartitionDiff& p : *partitions) {
      if (!(ok = in.Partition(&p))) break;
    }
  }
  if (!ok || !in.empty()) {
    partitions->clear();
    return absl::DataLossError(absl::StrCat("page ", next_,
                                            " of the diff's spill file in ",
                                            dir_, " does not read back"));
  }
  *dataset = extent.dataset;
  ++next_;
  return true;
}

int64_t DiffSpill::bytes() const {
  absl::MutexLock lock(&mu_);
  return end_;
}

}  // namespace backfill
