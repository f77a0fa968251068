#include "storage/sql/state_values.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "core/base/status_macros.h"
#include "core/base/sv.h"

namespace backfill::state_values {

std::string EncodeFields(const std::vector<std::string>& fields) {
  std::string out;
  for (const std::string& f : fields) absl::StrAppend(&out, f.size(), ":", f);
  return out;
}

absl::StatusOr<std::vector<std::string>> DecodeFields(std::string_view in) {
  std::vector<std::string> out;
  while (!in.empty()) {
    size_t colon = in.find(':');
    size_t len = 0;
    if (colon == std::string_view::npos ||
        !absl::SimpleAtoi(Sv(in.substr(0, colon)), &len) ||
        len > in.size() - colon - 1) {
      return absl::DataLossError("state store: malformed encoded list");
    }
    out.emplace_back(in.substr(colon + 1, len));
    in.remove_prefix(colon + 1 + len);
  }
  return out;
}

std::string EncodeInputs(const std::vector<InputFingerprint>& inputs) {
  std::vector<std::string> fields;
  for (const InputFingerprint& in : inputs) {
    fields.push_back(in.dataset);
    fields.push_back(in.partition);
    fields.push_back(in.fingerprint);
    fields.push_back(absl::StrCat(in.rows));
  }
  return EncodeFields(fields);
}

absl::StatusOr<std::vector<InputFingerprint>> DecodeInputs(
    std::string_view text) {
  ASSIGN_OR_RETURN(std::vector<std::string> fields, DecodeFields(text));
  if (fields.size() % 4 != 0) {
    return absl::DataLossError("state store: malformed input list");
  }
  std::vector<InputFingerprint> out;
  for (size_t i = 0; i < fields.size(); i += 4) {
    InputFingerprint in;
    in.dataset = fields[i];
    in.partition = fields[i + 1];
    in.fingerprint = fields[i + 2];
    if (!absl::SimpleAtoi(fields[i + 3], &in.rows)) {
      return absl::DataLossError("state store: malformed input row count");
    }
    out.push_back(std::move(in));
  }
  return out;
}

std::string EncodeMeasures(const std::vector<MeasureTotals>& measures) {
  std::vector<std::string> fields;
  for (const MeasureTotals& m : measures) {
    fields.push_back(absl::StrFormat("%.17g", m.before));
    fields.push_back(absl::StrFormat("%.17g", m.after));
  }
  return EncodeFields(fields);
}

absl::StatusOr<std::vector<MeasureTotals>> DecodeMeasures(
    std::string_view text, const std::vector<std::string>& columns) {
  ASSIGN_OR_RETURN(std::vector<std::string> fields, DecodeFields(text));
  if (fields.size() != 2 * columns.size()) {
    return absl::DataLossError("state store: malformed measure totals");
  }
  std::vector<MeasureTotals> out;
  for (size_t i = 0; i < columns.size(); ++i) {
    MeasureTotals m;
    m.column = columns[i];
    if (!absl::SimpleAtod(fields[2 * i], &m.before) ||
        !absl::SimpleAtod(fields[2 * i + 1], &m.after)) {
      return absl::DataLossError("state store: malformed measure total");
    }
    out.push_back(std::move(m));
  }
  return out;
}

std::string EncodeSamples(const std::vector<DiffSample>& samples) {
  std::vector<std::string> encoded;
  for (const DiffSample& sample : samples) {
    std::vector<std::string> fields = {
        DiffChangeName(sample.change), absl::StrCat(sample.key.size()),
        absl::StrCat(sample.before.size()), absl::StrCat(sample.after.size())};
    for (const auto* part : {&sample.key, &sample.before, &sample.after}) {
      fields.insert(fields.end(), part->begin(), part->end());
    }
    encoded.push_back(EncodeFields(fields));
  }
  return EncodeFields(encoded);
}

absl::StatusOr<std::vector<DiffSample>> DecodeSamples(std::string_view text) {
  ASSIGN_OR_RETURN(std::vector<std::string> encoded, DecodeFields(text));
  std::vector<DiffSample> out;
  for (const std::string& one : encoded) {
    ASSIGN_OR_RETURN(std::vector<std::string> fields, DecodeFields(one));
    size_t n[3];
    if (fields.size() < 4 || !absl::SimpleAtoi(fields[1], &n[0]) ||
        !absl::SimpleAtoi(fields[2], &n[1]) ||
        !absl::SimpleAtoi(fields[3], &n[2]) ||
        fields.size() != 4 + n[0] + n[1] + n[2]) {
      return absl::DataLossError("state store: malformed diff sample");
    }
    DiffSample sample;
    if (fields[0] == "added") {
      sample.change = DiffChange::kAdded;
    } else if (fields[0] == "removed") {
      sample.change = DiffChange::kRemoved;
    } else {
      sample.change = DiffChange::kChanged;
    }
    auto at = fields.begin() + 4;
    sample.key.assign(at, at + n[0]);
    at += n[0];
    sample.before.assign(at, at + n[1]);
    at += n[1];
    sample.after.assign(at, at + n[2]);
    out.push_back(std::move(sample));
  }
  return out;
}

int64_t InputRows(const std::vector<InputFingerprint>& inputs) {
  int64_t sum = 0;
  for (const InputFingerprint& in : inputs) sum += in.rows;
  return sum;
}

std::string JobStateText(JobState s) { return std::string(JobStateName(s)); }
std::string TaskStateText(TaskState s) { return std::string(TaskStateName(s)); }

}  // namespace backfill::state_values
