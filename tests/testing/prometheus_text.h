// A reader of the Prometheus text exposition format for tests: the samples
// of a scrape (name, labels, value) and the families it declares (# TYPE).
// Written apart from server/metrics so that tests read scrapes the way
// Prometheus does, not the way the code wrote them. Header-only; stateless.

#ifndef BACKFILL_TESTS_TESTING_PROMETHEUS_TEXT_H_
#define BACKFILL_TESTS_TESTING_PROMETHEUS_TEXT_H_

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

namespace backfill {
namespace testing {

struct PromSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

// Every sample line of `text`; a line that does not parse is returned with
// name "<unparsed>" and the line as its only label, so tests see it.
inline std::vector<PromSample> ParseSamples(const std::string& text) {
  std::vector<PromSample> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.empty() || line[0] == '#') continue;
    PromSample sample;
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
    sample.name = line.substr(0, i);
    bool ok = !sample.name.empty();
    if (ok && i < line.size() && line[i] == '{') {
      ++i;
      while (ok && i < line.size() && line[i] != '}') {
        const size_t eq = line.find('=', i);
        if (eq == std::string::npos || eq + 1 >= line.size() ||
            line[eq + 1] != '"') {
          ok = false;
          break;
        }
        const std::string key = line.substr(i, eq - i);
        std::string value;
        size_t j = eq + 2;
        while (j < line.size() && line[j] != '"') {
          if (line[j] == '\\' && j + 1 < line.size()) {
            const char c = line[j + 1];
            value += c == 'n' ? '\n' : c;
            j += 2;
          } else {
            value += line[j++];
          }
        }
        if (j >= line.size()) {
          ok = false;
          break;
        }
        sample.labels[key] = value;
        i = j + 1;
        if (i < line.size() && line[i] == ',') ++i;
      }
      if (ok && i < line.size() && line[i] == '}') ++i;
    }
    if (ok && i < line.size() && line[i] == ' ') {
      const std::string number = line.substr(i + 1);
      char* rest = nullptr;
      sample.value = std::strtod(number.c_str(), &rest);
      ok = rest != number.c_str();
    } else {
      ok = false;
    }
    if (!ok) {
      sample = PromSample();
      sample.name = "<unparsed>";
      sample.labels["line"] = line;
    }
    out.push_back(std::move(sample));
  }
  return out;
}

// The families `text` declares: name -> type ("counter", "histogram", ...).
inline std::map<std::string, std::string> DeclaredFamilies(
    const std::string& text) {
  std::map<std::string, std::string> out;
  size_t pos = 0;
  const std::string prefix = "# TYPE ";
  while ((pos = text.find(prefix, pos)) != std::string::npos) {
    if (pos != 0 && text[pos - 1] != '\n') {
      pos += prefix.size();
      continue;
    }
    const size_t start = pos + prefix.size();
    const size_t end = text.find('\n', start);
    const std::string rest = text.substr(start, end - start);
    const size_t space = rest.find(' ');
    if (space != std::string::npos) {
      out[rest.substr(0, space)] = rest.substr(space + 1);
    }
    pos = start;
  }
  return out;
}

// The sum of the samples named `name` whose labels include `labels`; -1
// when there is none.
inline double SumOf(const std::vector<PromSample>& samples,
                    const std::string& name,
                    const std::map<std::string, std::string>& labels = {}) {
  double sum = 0;
  bool any = false;
  for (const PromSample& s : samples) {
    if (s.name != name) continue;
    bool match = true;
    for (const auto& [k, v] : labels) {
      auto it = s.labels.find(k);
      if (it == s.labels.end() || it->second != v) match = false;
    }
    if (!match) continue;
    sum += s.value;
    any = true;
  }
  return any ? sum : -1;
}

}  // namespace testing
}  // namespace backfill

#endif  // BACKFILL_TESTS_TESTING_PROMETHEUS_TEXT_H_
