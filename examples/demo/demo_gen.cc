// backfill-demo-gen: writes the demo warehouse, <data-dir>/warehouse.db.
//
//   raw_orders(order_id, order_date 'YYYY-MM-DD', customer_id, amount, refund)
//   dim_customers(customer_id, name, region)
//
// One year of orders (2025-01-01 .. 2025-12-31 by default, 200-400 a day) by
// 500 customers in 5 regions. Refunds are non-zero only during a "refund
// incident" of 30 consecutive days (2025-06-01 .. 2025-06-30 by default):
// a transform that forgets refunds is wrong on exactly those days.
//
// The output is deterministic: a fixed-seed std::mt19937_64 (whose sequence
// the standard defines) with our own range mapping, since the std::
// distributions differ between standard library implementations. Values are
// written through bound parameters only.
//
// Usage: backfill-demo-gen --data-dir DIR [--force] [--start YYYY-MM-DD]
//                          [--days N] [--refund-start YYYY-MM-DD]
//                          [--refund-days N] [--seed N]

#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <string_view>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/time/civil_time.h"

namespace {

constexpr int kCustomers = 500;
constexpr const char* kRegions[] = {"north", "south", "east", "west",
                                    "central"};
constexpr int kRegionCount = sizeof(kRegions) / sizeof(kRegions[0]);
constexpr int kMinOrdersPerDay = 200;
constexpr int kMaxOrdersPerDay = 400;

struct Options {
  std::string data_dir;
  bool force = false;
  absl::CivilDay start{2025, 1, 1};
  int days = 365;
  absl::CivilDay refund_start{2025, 6, 1};
  int refund_days = 30;
  uint64_t seed = 20250101;
};

void Usage(FILE* out) {
  std::fprintf(out,
               "usage: backfill-demo-gen --data-dir DIR [--force] "
               "[--start YYYY-MM-DD] [--days N]\n"
               "                         [--refund-start YYYY-MM-DD] "
               "[--refund-days N] [--seed N]\n");
}

bool ParseDay(std::string_view text, absl::CivilDay* day) {
  return text.size() == 10 && absl::ParseCivilTime(std::string(text), day);
}

// Parses argv; on error prints a one-line reason and returns false.
bool ParseFlags(int argc, char** argv, Options* opts) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    std::string value;
    bool has_inline_value = false;
    if (size_t eq = arg.find('=');
        arg.substr(0, 2) == "--" && eq != std::string_view::npos) {
      value = std::string(arg.substr(eq + 1));
      arg = arg.substr(0, eq);
      has_inline_value = true;
    }
    auto take_value = [&]() -> bool {
      if (has_inline_value) return true;
      if (i + 1 >= argc) {
        std::fprintf(stderr, "backfill-demo-gen: %s needs a value\n",
                     std::string(arg).c_str());
        return false;
      }
      value = argv[++i];
      return true;
    };
    auto bad = [&](const char* what) {
      std::fprintf(stderr, "backfill-demo-gen: %s: %s '%s'\n",
                   std::string(arg).c_str(), what, value.c_str());
      return false;
    };
    if (arg == "--help" || arg == "-h") {
      Usage(stdout);
      std::exit(0);
    } else if (arg == "--force") {
      opts->force = true;
    } else if (arg == "--data-dir") {
      if (!take_value()) return false;
      opts->data_dir = value;
    } else if (arg == "--start" || arg == "--refund-start") {
      if (!take_value()) return false;
      absl::CivilDay* day =
          arg == "--start" ? &opts->start : &opts->refund_start;
      if (!ParseDay(value, day)) return bad("expected YYYY-MM-DD, got");
    } else if (arg == "--days" || arg == "--refund-days") {
      if (!take_value()) return false;
      int n = 0;
      if (!absl::SimpleAtoi(value, &n) || n < 0 || n > 100000) {
        return bad("expected a number of days in [0, 100000], got");
      }
      (arg == "--days" ? opts->days : opts->refund_days) = n;
    } else if (arg == "--seed") {
      if (!take_value()) return false;
      if (!absl::SimpleAtoi(value, &opts->seed)) {
        return bad("expected an unsigned number, got");
      }
    } else {
      std::fprintf(stderr, "backfill-demo-gen: unknown argument '%s'\n",
                   argv[i]);
      Usage(stderr);
      return false;
    }
  }
  if (opts->data_dir.empty()) {
    std::fprintf(stderr, "backfill-demo-gen: --data-dir is required\n");
    Usage(stderr);
    return false;
  }
  return true;
}

// Uniform integer in [lo, hi]; the modulo bias is irrelevant for a demo and
// the mapping is the same on every platform.
int64_t Uniform(std::mt19937_64& rng, int64_t lo, int64_t hi) {
  return lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1));
}

class Db {
 public:
  ~Db() {
    if (db_ != nullptr) sqlite3_close(db_);
  }
  bool Open(const std::string& path) {
    if (sqlite3_open(path.c_str(), &db_) != SQLITE_OK) {
      return Fail("open " + path);
    }
    return true;
  }
  bool Exec(const char* sql) {
    if (sqlite3_exec(db_, sql, nullptr, nullptr, nullptr) != SQLITE_OK) {
      return Fail(sql);
    }
    return true;
  }
  sqlite3* get() { return db_; }
  bool Fail(const std::string& what) {
    std::fprintf(stderr, "backfill-demo-gen: sqlite: %s: %s\n", what.c_str(),
                 db_ != nullptr ? sqlite3_errmsg(db_) : "out of memory");
    return false;
  }

 private:
  sqlite3* db_ = nullptr;
};

class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) {
    sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr);
  }
  ~Stmt() { sqlite3_finalize(stmt_); }
  sqlite3_stmt* get() { return stmt_; }
  // Steps once and resets for the next row; false on error.
  bool StepReset() {
    int rc = sqlite3_step(stmt_);
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    return rc == SQLITE_DONE;
  }

 private:
  sqlite3_stmt* stmt_ = nullptr;
};

bool Generate(const Options& opts, const std::string& path) {
  Db db;
  if (!db.Open(path)) return false;
  if (!db.Exec("BEGIN") ||
      !db.Exec("CREATE TABLE dim_customers("
               "customer_id INTEGER PRIMARY KEY, name TEXT NOT NULL, "
               "region TEXT NOT NULL)") ||
      !db.Exec("CREATE TABLE raw_orders("
               "order_id INTEGER PRIMARY KEY, order_date TEXT NOT NULL, "
               "customer_id INTEGER NOT NULL, amount REAL NOT NULL, "
               "refund REAL NOT NULL DEFAULT 0)")) {
    return false;
  }

  std::mt19937_64 rng(opts.seed);

  Stmt customer(db.get(),
                "INSERT INTO dim_customers(customer_id, name, region) "
                "VALUES (?1, ?2, ?3)");
  if (customer.get() == nullptr) return db.Fail("prepare dim_customers");
  for (int id = 1; id <= kCustomers; ++id) {
    const std::string name = absl::StrFormat("Customer %04d", id);
    const char* region = kRegions[Uniform(rng, 0, kRegionCount - 1)];
    sqlite3_bind_int64(customer.get(), 1, id);
    sqlite3_bind_text(customer.get(), 2, name.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(customer.get(), 3, region, -1, SQLITE_STATIC);
    if (!customer.StepReset()) return db.Fail("insert dim_customers");
  }

  Stmt order(db.get(),
             "INSERT INTO raw_orders(order_id, order_date, customer_id, "
             "amount, refund) VALUES (?1, ?2, ?3, ?4, ?5)");
  if (order.get() == nullptr) return db.Fail("prepare raw_orders");
  const absl::CivilDay refund_end = opts.refund_start + opts.refund_days;
  int64_t order_id = 0;
  int64_t refunds = 0;
  for (int d = 0; d < opts.days; ++d) {
    const absl::CivilDay day = opts.start + d;
    const std::string date = absl::FormatCivilTime(day);
    const bool incident = day >= opts.refund_start && day < refund_end;
    const int64_t orders = Uniform(rng, kMinOrdersPerDay, kMaxOrdersPerDay);
    for (int64_t i = 0; i < orders; ++i) {
      const int64_t customer_id = Uniform(rng, 1, kCustomers);
      const int64_t amount_cents = Uniform(rng, 500, 50000);  // 5 .. 500
      int64_t refund_cents = 0;
      // Always draw, so the days outside the incident do not depend on it.
      const int64_t dice = Uniform(rng, 0, 99);
      const int64_t share = Uniform(rng, 10, 100);  // percent refunded
      if (incident && dice < 20) {
        refund_cents = amount_cents * share / 100;
        ++refunds;
      }
      sqlite3_bind_int64(order.get(), 1, ++order_id);
      sqlite3_bind_text(order.get(), 2, date.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_int64(order.get(), 3, customer_id);
      sqlite3_bind_double(order.get(), 4, amount_cents / 100.0);
      sqlite3_bind_double(order.get(), 5, refund_cents / 100.0);
      if (!order.StepReset()) return db.Fail("insert raw_orders");
    }
  }
  if (!db.Exec("CREATE INDEX raw_orders_by_date ON raw_orders(order_date)") ||
      !db.Exec("COMMIT")) {
    return false;
  }
  std::printf(
      "backfill-demo-gen: wrote %s: %lld orders over %d days from %s, "
      "%d customers in %d regions, %lld refunds between %s and %s\n",
      path.c_str(), static_cast<long long>(order_id), opts.days,
      absl::FormatCivilTime(opts.start).c_str(), kCustomers, kRegionCount,
      static_cast<long long>(refunds),
      absl::FormatCivilTime(opts.refund_start).c_str(),
      absl::FormatCivilTime(refund_end - 1).c_str());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options opts;
  if (!ParseFlags(argc, argv, &opts)) return 2;

  if (mkdir(opts.data_dir.c_str(), 0755) != 0 && errno != EEXIST) {
    std::perror(("backfill-demo-gen: mkdir " + opts.data_dir).c_str());
    return 1;
  }
  const std::string path = opts.data_dir + "/warehouse.db";
  if (access(path.c_str(), F_OK) == 0) {
    if (!opts.force) {
      std::fprintf(stderr,
                   "backfill-demo-gen: %s exists; pass --force to replace "
                   "it\n",
                   path.c_str());
      return 1;
    }
  }
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
    const std::string file = path + suffix;
    if (unlink(file.c_str()) != 0 && errno != ENOENT) {
      std::perror(("backfill-demo-gen: remove " + file).c_str());
      return 1;
    }
  }
  return Generate(opts, path) ? 0 : 1;
}
