// FakeEngine (fake_engine.h): the client predicates it evaluates
// (`COLUMN OP LITERAL`), interrupting them, and rollbacks with their
// copies.

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/model/fingerprint.h"
#include "core/model/partition.h"
#include "core/plan/affected_by.h"
#include "tests/testing/fake_engine.h"
#include "tests/testing/fake_engine_internal.h"

namespace backfill::testing {

using fake_engine_internal::FingerprintOf;
using fake_engine_internal::IsStoreJobId;
using fake_engine_internal::Sum;

namespace {

// `COLUMN OP LITERAL`, the one predicate form the fake evaluates.
struct Comparison {
  std::string column;
  std::string op;
  bool numeric = false;
  double number = 0;
  std::string text;
};

std::optional<Comparison> ParseComparison(std::string_view p) {
  auto skip_space = [&p] {
    while (!p.empty() &&
           absl::ascii_isspace(static_cast<unsigned char>(p[0]))) {
      p.remove_prefix(1);
    }
  };
  Comparison c;
  skip_space();
  size_t n = 0;
  while (
      n < p.size() &&
      (absl::ascii_isalnum(static_cast<unsigned char>(p[n])) || p[n] == '_')) {
    ++n;
  }
  if (n == 0 || absl::ascii_isdigit(static_cast<unsigned char>(p[0]))) {
    return std::nullopt;
  }
  c.column = std::string(p.substr(0, n));
  p.remove_prefix(n);
  skip_space();
  for (const char* op : {">=", "<=", "!=", "<>", "==", "=", "<", ">"}) {
    const std::string_view o(op);
    if (p.substr(0, o.size()) == o) {
      c.op = op;
      p.remove_prefix(o.size());
      break;
    }
  }
  if (c.op.empty()) return std::nullopt;
  if (c.op == "==") c.op = "=";
  if (c.op == "<>") c.op = "!=";
  skip_space();
  while (!p.empty() &&
         absl::ascii_isspace(static_cast<unsigned char>(p.back()))) {
    p.remove_suffix(1);
  }
  if (p.size() >= 2 && p.front() == '\'' && p.back() == '\'') {
    std::string_view body = p.substr(1, p.size() - 2);
    for (size_t i = 0; i < body.size(); ++i) {
      if (body[i] != '\'') {
        c.text.push_back(body[i]);
      } else if (i + 1 < body.size() && body[i + 1] == '\'') {
        c.text.push_back('\'');
        ++i;
      } else {
        return std::nullopt;  // a quote inside: more than one literal
      }
    }
    return c;
  }
  if (p.empty() ||
      !absl::SimpleAtod(absl::string_view(p.data(), p.size()), &c.number)) {
    return std::nullopt;
  }
  c.numeric = true;
  return c;
}

template <typename T>
bool Compare(const T& a, const std::string& op, const T& b) {
  if (op == "=") return a == b;
  if (op == "!=") return a != b;
  if (op == "<") return a < b;
  if (op == "<=") return a <= b;
  if (op == ">") return a > b;
  return a >= b;
}

}  // namespace

void FakeEngine::AddRows(const std::string& dataset, std::vector<Row> rows) {
  absl::MutexLock lock(&mu_);
  std::vector<Row>& kept = rows_[dataset];
  for (Row& row : rows) kept.push_back(std::move(row));
}

absl::StatusOr<std::vector<std::string>> FakeEngine::PartitionsMatching(
    const DatasetSpec& dataset, const std::string& predicate,
    size_t max_partitions) {
  if (absl::Status s = Enter({"PartitionsMatching", "", dataset.name, ""});
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckPredicate(predicate); !s.ok()) return s;
  std::optional<Comparison> c = ParseComparison(predicate);
  if (!c) {
    return absl::InvalidArgumentError(absl::StrCat(
        "affected_by: predicate ", QuotePredicate(predicate),
        " does not work against the fake engine: it evaluates only COLUMN OP "
        "LITERAL"));
  }
  absl::MutexLock lock(&mu_);
  auto it = rows_.find(dataset.name);
  if (it == rows_.end() || it->second.empty()) {
    return std::vector<std::string>{};
  }
  bool known = false;
  std::set<std::string> matching;
  for (const Row& row : it->second) {
    auto value = row.values.find(c->column);
    if (value == row.values.end()) continue;
    known = true;
    if (!row.partition.has_value()) continue;
    bool match = false;
    if (c->numeric) {
      double v = 0;
      match =
          absl::SimpleAtod(value->second, &v) && Compare(v, c->op, c->number);
    } else {
      match = Compare(value->second, c->op, c->text);
    }
    if (match) matching.insert(*row.partition);
  }
  if (!known) {
    return absl::InvalidArgumentError(
        absl::StrCat("affected_by: predicate ", QuotePredicate(predicate),
                     " does not work against dataset ", dataset.name,
                     ": no such column: ", c->column));
  }
  if (matching.size() > max_partitions) {
    return absl::InvalidArgumentError(absl::StrCat(
        "affected_by: more than ", max_partitions, " partitions of ",
        dataset.name, " have a row where ", QuotePredicate(predicate),
        "; at most ", max_partitions, " per backfill: narrow the predicate"));
  }
  return std::vector<std::string>(matching.begin(), matching.end());
}

void FakeEngine::Interrupt() {
  absl::MutexLock lock(&mu_);
  ++interrupts_;
  ++calls_["Interrupt"];
  call_log_.push_back({"Interrupt", "", "", ""});
}

absl::StatusOr<RollbackResult> FakeEngine::Rollback(const RollbackSpec& spec) {
  const JobLayout& layout = spec.layout;
  if (absl::Status s = Enter({"Rollback", layout.job_id, "", ""}); !s.ok()) {
    return s;
  }
  for (const JobLayout::Item& item : layout.items) {
    if (item.dataset == nullptr) {
      return absl::InvalidArgumentError("Rollback: item without dataset");
    }
  }
  const std::string& job_id = layout.job_id;
  absl::MutexLock lock(&mu_);
  auto measure = [&](RollbackResult* result) {
    for (const JobLayout::Item& item : layout.items) {
      const std::map<std::string, int64_t>& table =
          published_[item.dataset->name];
      for (const std::string& partition : item.partitions) {
        int64_t rows = 0;
        if (!item.dataset->partition) {
          rows = Sum(table);
        } else if (auto it = table.find(partition); it != table.end()) {
          rows = it->second;
        }
        result->partitions.push_back({item.dataset->name, partition, rows,
                                      absl::StrCat("fake:", item.dataset->name,
                                                   "/", partition, ":", rows)});
        result->rows += rows;
      }
    }
  };
  RollbackResult result;
  if (auto it = rollbacks_.find(job_id);
      it != rollbacks_.end() && it->second.store_id == claimed_) {
    measure(&result);
    result.already = true;
    return result;
  }
  if (!markers_.count({claimed_, job_id})) {
    return absl::FailedPreconditionError(absl::StrCat(
        "rollback of job ", job_id,
        ": the warehouse holds no publication of it by this state store; "
        "nothing was restored"));
  }
  if (!claimed_.empty() && owner_ != claimed_) {
    return absl::FailedPreconditionError(
        absl::StrCat("rollback of job ", job_id,
                     ": the warehouse no longer belongs to this state store (",
                     claimed_, "); nothing was restored"));
  }
  for (const JobLayout::Item& item : layout.items) {
    if (!copies_.count({job_id, item.dataset->name})) {
      return absl::FailedPreconditionError(absl::StrCat(
          "rollback of job ", job_id, ", dataset ", item.dataset->name,
          ": table ", item.dataset->name,
          " (the rollback copy) does not exist; nothing was restored"));
    }
  }
  for (const JobLayout::Item& item : layout.items) {
    const DatasetSpec& ds = *item.dataset;
    const std::map<std::string, int64_t>& copy = copies_.at({job_id, ds.name});
    std::map<std::string, int64_t>& table = published_[ds.name];
    ForgetEditsLocked(ds.name, item.partitions, ds.partition.has_value());
    if (!ds.partition) {
      table.clear();
      if (const int64_t rows = Sum(copy); rows > 0) table[""] = rows;
      continue;
    }
    for (const std::string& partition : item.partitions) {
      table.erase(partition);
      if (auto it = copy.find(partition); it != copy.end() && it->second > 0) {
        table[partition] = it->second;
      }
    }
  }
  measure(&result);
  std::set<std::string> dropped(spec.marker.with_jobs.begin(),
                                spec.marker.with_jobs.end());
  dropped.insert(job_id);
  for (auto it = copies_.begin(); it != copies_.end();) {
    it = dropped.count(it->first.first) ? copies_.erase(it) : std::next(it);
  }
  RollbackMarker marker = spec.marker;
  marker.store_id = claimed_;
  rollbacks_[job_id] = std::move(marker);
  return result;
}

absl::StatusOr<std::vector<RollbackCopy>> FakeEngine::ListRollbackCopies() {
  if (absl::Status s = Enter({"ListRollbackCopies", "", "", ""}); !s.ok()) {
    return s;
  }
  absl::MutexLock lock(&mu_);
  std::vector<RollbackCopy> out;
  for (const auto& [key, copy] : copies_) {
    if (IsStoreJobId(key.first)) out.push_back({key.first, key.second});
  }
  std::sort(out.begin(), out.end(),
            [](const RollbackCopy& a, const RollbackCopy& b) {
              auto number = [](const std::string& id) {
                return std::make_pair(id.size(), id);
              };
              return std::make_pair(number(a.job_id), a.dataset) <
                     std::make_pair(number(b.job_id), b.dataset);
            });
  return out;
}

absl::Status FakeEngine::DropRollbackCopies(
    const std::vector<RollbackCopy>& copies) {
  if (absl::Status s = Enter({"DropRollbackCopies", "", "", ""}); !s.ok()) {
    return s;
  }
  absl::MutexLock lock(&mu_);
  for (const RollbackCopy& copy : copies) {
    copies_.erase({copy.job_id, copy.dataset});
  }
  return absl::OkStatus();
}

}  // namespace backfill::testing
