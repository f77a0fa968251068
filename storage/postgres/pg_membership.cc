#include "storage/postgres/pg_membership.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/time/civil_time.h"
#include "core/base/status_macros.h"
#include "core/base/sv.h"

namespace backfill::postgres {
namespace {

// The two-argument function. @S@ stands for the schema, @Q@ for the dollar
// quote around the body. Every rule mirrors PartitionOfValue:
//   - key: 1..256 bytes, no byte 0x01..0x1f or 0x7f (text holds no NUL);
//   - month: "YYYY-MM" for the month grain alone;
//   - "YYYY-MM-DD", then optionally "THH[:MM[:SS[.F]]]" or " HH:MM[:SS[.F]]"
//     (F: 1 to 9 digits), then optionally "Z", which needs a time; HH is
//     00..23, MM and SS 00..59; upper-case T and Z only;
//   - years 0001..9999, real calendar dates (proleptic Gregorian);
//   - the last partition of year 9999 is none;
//   - grain '' (unpartitioned): '' for every value.
// The value is copied into a COLLATE "C" variable, so that the regular
// expressions see bytes and ASCII whatever the caller's collation ([0-9]
// is ASCII digits only). No exception block: PARALLEL SAFE code may not
// start subtransactions.
constexpr char kTwoArgumentFunction[] =
    R"sql(CREATE OR REPLACE FUNCTION @S@._bf_partition_of(grain text, value text)
RETURNS text LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS @Q@
DECLARE
  g text COLLATE "C" := grain;
  v text COLLATE "C" := value;
  f text[];
  y int;
  m int;
  d int;
  h int;
  last_day int;
  p text COLLATE "C";
BEGIN
  IF g IS NULL THEN
    RETURN NULL;
  ELSIF g = '' THEN
    RETURN '';
  ELSIF v IS NULL THEN
    RETURN NULL;
  ELSIF g = 'key' THEN
    IF pg_catalog.octet_length(v) BETWEEN 1 AND 256
        AND v !~ E'[\\x01-\\x1f\\x7f]' THEN
      RETURN v;
    END IF;
    RETURN NULL;
  ELSIF g NOT IN ('hour', 'day', 'month') THEN
    RAISE EXCEPTION '_bf_partition_of: unknown grain %',
        pg_catalog.quote_literal(g) USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF g = 'month' THEN
    f := pg_catalog.regexp_match(v, '^([0-9]{4})-([0-9]{2})$');
    IF f IS NOT NULL THEN
      y := f[1]::int;
      m := f[2]::int;
      IF y < 1 OR m < 1 OR m > 12 OR v = '9999-12' THEN
        RETURN NULL;
      END IF;
      RETURN v;
    END IF;
  END IF;
  f := pg_catalog.regexp_match(v,
      '^([0-9]{4})-([0-9]{2})-([0-9]{2})'
      '(?:T([0-9]{2})(?::[0-5][0-9](?::[0-5][0-9](?:[.][0-9]{1,9})?)?)?Z?'
      '| ([0-9]{2}):[0-5][0-9](?::[0-5][0-9](?:[.][0-9]{1,9})?)?Z?)?$');
  IF f IS NULL THEN
    RETURN NULL;
  END IF;
  y := f[1]::int;
  m := f[2]::int;
  d := f[3]::int;
  h := COALESCE(f[4], f[5], '00')::int;
  last_day := CASE
    WHEN m = 2 AND y % 4 = 0 AND (y % 100 <> 0 OR y % 400 = 0) THEN 29
    WHEN m = 2 THEN 28
    WHEN m IN (4, 6, 9, 11) THEN 30
    ELSE 31
  END;
  IF y < 1 OR m < 1 OR m > 12 OR d < 1 OR d > last_day OR h > 23 THEN
    RETURN NULL;
  END IF;
  IF g = 'hour' THEN
    p := pg_catalog.substr(v, 1, 10) || 'T' || COALESCE(f[4], f[5], '00');
  ELSIF g = 'day' THEN
    p := pg_catalog.substr(v, 1, 10);
  ELSE
    p := pg_catalog.substr(v, 1, 7);
  END IF;
  IF p IN ('9999-12-31T23', '9999-12-31', '9999-12') THEN
    RETURN NULL;
  END IF;
  RETURN p;
END
@Q@)sql";

// The three-argument function (PartitionOfValues): the time value's
// partition, '|', and the key value when it is a valid key without '|'.
constexpr char kThreeArgumentFunction[] =
    R"sql(CREATE OR REPLACE FUNCTION @S@._bf_partition_of(time_grain text, time_value text, key_value text)
RETURNS text LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS @Q@
DECLARE
  g text COLLATE "C" := time_grain;
  k text COLLATE "C" := key_value;
  t text COLLATE "C";
BEGIN
  IF g IS NULL THEN
    RETURN NULL;
  ELSIF g NOT IN ('hour', 'day', 'month') THEN
    RAISE EXCEPTION '_bf_partition_of: % is not a time grain',
        pg_catalog.quote_literal(g) USING ERRCODE = 'invalid_parameter_value';
  END IF;
  t := @S@._bf_partition_of(g, time_value COLLATE "C");
  IF t IS NULL OR k IS NULL OR pg_catalog.strpos(k, '|') > 0 THEN
    RETURN NULL;
  END IF;
  k := @S@._bf_partition_of('key', k);
  IF k IS NULL THEN
    RETURN NULL;
  END IF;
  RETURN t || '|' || k;
END
@Q@)sql";

// `text` with @S@ replaced by `schema` and @Q@ by a dollar quote that does
// not occur in the result (a quoted schema name may hold '$').
std::string Instantiate(std::string_view text, std::string_view schema) {
  const std::string body = absl::StrReplaceAll(Sv(text), {{"@S@", Sv(schema)}});
  std::string quote = "$bf$";
  for (int i = 0; body.find(quote) != std::string::npos; ++i) {
    quote = absl::StrCat("$bf", i, "$");
  }
  return absl::StrReplaceAll(body, {{"@Q@", quote}});
}

bool IsTimeKind(PgColumnKind kind) {
  return kind == PgColumnKind::kDate || kind == PgColumnKind::kTimestamp ||
         kind == PgColumnKind::kTimestampTz || kind == PgColumnKind::kText;
}

bool IsKeyKind(PgColumnKind kind) {
  return kind == PgColumnKind::kText || kind == PgColumnKind::kInteger;
}

// The SQL type a typed time column's bounds are cast to.
const char* TypeName(PgColumnKind kind) {
  switch (kind) {
    case PgColumnKind::kDate:
      return "date";
    case PgColumnKind::kTimestamp:
      return "timestamp";
    case PgColumnKind::kTimestampTz:
      return "timestamptz";
    default:
      return "text";
  }
}

// The first date at or after `t`: a date value d is the instant d 00:00,
// so d >= t exactly when d >= CeilDay(t).
absl::CivilDay CeilDay(absl::CivilSecond t) {
  const absl::CivilDay day(t);
  return absl::CivilSecond(day) == t ? day : day + 1;
}

// `t` as a bound of a column of `kind` (a typed time kind): the text a
// $n::date / ::timestamp / ::timestamptz parameter or literal reads.
std::string BoundText(PgColumnKind kind, absl::CivilSecond t) {
  if (kind == PgColumnKind::kDate) {
    const absl::CivilDay d = CeilDay(t);
    return absl::StrFormat("%04d-%02d-%02d", d.year(), d.month(), d.day());
  }
  return absl::StrFormat("%04d-%02d-%02d %02d:%02d:%02d%s", t.year(), t.month(),
                         t.day(), t.hour(), t.minute(), t.second(),
                         kind == PgColumnKind::kTimestampTz ? "+00" : "");
}

// The half-open UTC range of a partition of a time grain (validated).
struct TimeRange {
  absl::CivilSecond start;
  absl::CivilSecond end;
};

absl::StatusOr<TimeRange> RangeOf(Grain grain, std::string_view partition) {
  RETURN_IF_ERROR(ValidatePartition(grain, partition));
  const std::string text(partition);
  switch (grain) {
    case Grain::kHour: {
      absl::CivilHour h;
      if (!absl::ParseCivilTime(text, &h)) break;
      return TimeRange{absl::CivilSecond(h), absl::CivilSecond(h + 1)};
    }
    case Grain::kDay: {
      absl::CivilDay d;
      if (!absl::ParseCivilTime(text, &d)) break;
      return TimeRange{absl::CivilSecond(d), absl::CivilSecond(d + 1)};
    }
    case Grain::kMonth: {
      absl::CivilMonth m;
      if (!absl::ParseCivilTime(text, &m)) break;
      return TimeRange{absl::CivilSecond(m), absl::CivilSecond(m + 1)};
    }
    default:
      break;
  }
  return absl::InternalError(absl::StrCat(
      "cannot read ", GrainName(grain), " partition ", QuoteValue(partition)));
}

// The range of the values that belong to some partition of `grain`: from
// 0001-01-01 to the end of the last partition before year 9999's last.
TimeRange SupportedRange(Grain grain) {
  const absl::CivilSecond start(1, 1, 1);
  switch (grain) {
    case Grain::kHour:
      return {start, absl::CivilSecond(9999, 12, 31, 23)};
    case Grain::kDay:
      return {start, absl::CivilSecond(9999, 12, 31)};
    default:
      return {start, absl::CivilSecond(9999, 12, 1)};
  }
}

// The text of a typed value cut to its partition of `grain` (valid only in
// SupportedRange): a DATE is hour 00 of its day; TIMESTAMPTZ is read in
// UTC.
std::string FormatTyped(Grain grain, PgColumnKind kind,
                        const std::string& column) {
  std::string value;
  switch (kind) {
    case PgColumnKind::kDate:
      value = absl::StrCat("(", column, ")::timestamp");
      break;
    case PgColumnKind::kTimestampTz:
      value = absl::StrCat("(", column, ") AT TIME ZONE 'UTC'");
      break;
    default:
      value = column;
      break;
  }
  switch (grain) {
    case Grain::kHour:
      if (kind == PgColumnKind::kDate) {
        return absl::StrCat("pg_catalog.to_char(", value,
                            ", 'YYYY-MM-DD') || 'T00'");
      }
      return absl::StrCat("pg_catalog.to_char(", value,
                          ", 'YYYY-MM-DD\"T\"HH24')");
    case Grain::kDay:
      return absl::StrCat("pg_catalog.to_char(", value, ", 'YYYY-MM-DD')");
    default:
      return absl::StrCat("pg_catalog.to_char(", value, ", 'YYYY-MM')");
  }
}

// "the typed time column holds a value of some partition of `grain`".
std::string InSupportedRange(Grain grain, PgColumnKind kind,
                             const std::string& column) {
  const TimeRange range = SupportedRange(grain);
  return absl::StrCat(column, " >= ", TypeName(kind), " '",
                      BoundText(kind, range.start), "' AND ", column, " < ",
                      TypeName(kind), " '", BoundText(kind, range.end), "'");
}

std::string Param(int n) { return absl::StrCat("$", n); }

// The column as text in the "C" collation (for the functions).
std::string CText(const std::string& column) {
  return absl::StrCat("(", column, ")::text COLLATE \"C\"");
}

// The membership condition of a time column, from parameter `*next` on.
std::string TimeCondition(Grain grain, PgColumnKind kind,
                          const std::string& column, bool byte_ordered,
                          std::string_view schema, int* next) {
  const std::string lo = Param((*next)++);
  const std::string hi = Param((*next)++);
  if (kind != PgColumnKind::kText) {
    return absl::StrCat(column, " >= ", lo, "::", TypeName(kind), " AND ",
                        column, " < ", hi, "::", TypeName(kind));
  }
  const std::string p = Param((*next)++);
  // The candidate range in byte order: in the column's own collation when
  // that is byte order (an index on the column serves it), else in "C".
  const std::string c =
      byte_ordered ? column : absl::StrCat(column, " COLLATE \"C\"");
  // A value spelled exactly as the partition belongs to it: the function
  // (a PL/pgSQL call per row) runs only for the other spellings. The
  // candidate range of an hour is its day: of the day's other hours, only
  // values whose hour digits (characters 12-13, after 'T' or ' ') are the
  // partition's, or a date alone (hour 00), can belong to it, and the
  // function runs only for those.
  std::string other_spellings;
  if (grain == Grain::kHour) {
    other_spellings = absl::StrCat(
        "(pg_catalog.substr(", CText(column), ", 12, 2) = pg_catalog.substr(",
        p, "::text COLLATE \"C\", 12, 2) OR pg_catalog.octet_length(",
        CText(column), ") = 10) AND ");
  }
  return absl::StrCat(c, " >= ", lo, "::text AND ", c, " < ", hi,
                      "::text AND (", CText(column), " = ", p, "::text OR ",
                      other_spellings, Sv(schema), ".", kPartitionFunction,
                      "('", GrainName(grain), "', ", CText(column), ") = ", p,
                      "::text)");
}

// The membership condition of a key column, from parameter `*next` on.
std::string KeyCondition(PgColumnKind kind, const std::string& column,
                         int* next) {
  const std::string k = Param((*next)++);
  if (kind == PgColumnKind::kInteger) {
    // A NULL parameter (a key no BIGINT spells) makes it FALSE, whatever
    // the row holds.
    return absl::StrCat(column, " = ", k, "::bigint AND ", k,
                        "::bigint IS NOT NULL");
  }
  // The first equality is the one an index on the column serves; the
  // second holds it to bytes under a nondeterministic collation.
  return absl::StrCat(column, " = ", k, "::text AND ", column,
                      " COLLATE \"C\" = ", k, "::text");
}

// The parameter values of a time column's condition.
absl::Status AppendTimeValues(Grain grain, PgColumnKind kind,
                              std::string_view time,
                              std::vector<PgValue>* out) {
  if (kind == PgColumnKind::kText) {
    ASSIGN_OR_RETURN(CandidateRange range, CandidateRangeOf(grain, time));
    out->push_back(std::move(range.lo));
    out->push_back(std::move(range.hi));
    out->push_back(std::string(time));
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(TimeRange range, RangeOf(grain, time));
  out->push_back(BoundText(kind, range.start));
  out->push_back(BoundText(kind, range.end));
  return absl::OkStatus();
}

// The parameter value of a key column's condition: the key, or for an
// INTEGER column its canonical decimal within BIGINT (NULL otherwise).
PgValue KeyValue(PgColumnKind kind, std::string_view key) {
  if (kind != PgColumnKind::kInteger) return std::string(key);
  int64_t n;
  if (!absl::SimpleAtoi(Sv(key), &n) || absl::StrCat(n) != key) {
    return std::nullopt;
  }
  return std::string(key);
}

}  // namespace

const char* PgColumnKindName(PgColumnKind kind) {
  switch (kind) {
    case PgColumnKind::kDate:
      return "date";
    case PgColumnKind::kTimestamp:
      return "timestamp";
    case PgColumnKind::kTimestampTz:
      return "timestamptz";
    case PgColumnKind::kText:
      return "text";
    case PgColumnKind::kInteger:
      return "integer";
    case PgColumnKind::kOther:
      return "other";
  }
  return "other";
}

PgColumnKind PgColumnKindOf(std::string_view type) {
  // Lower case, without type modifiers "(...)", words separated by one
  // space: "timestamp(3) WITH  time zone" -> "timestamp with time zone".
  std::string words;
  int depth = 0;
  bool space = false;
  for (char c : type) {
    if (c == '(') {
      ++depth;
    } else if (c == ')') {
      if (--depth < 0) return PgColumnKind::kOther;
    } else if (depth > 0) {
      continue;
    } else if (absl::ascii_isspace(static_cast<unsigned char>(c))) {
      space = true;
    } else {
      if (space && !words.empty()) words.push_back(' ');
      space = false;
      words.push_back(absl::ascii_tolower(static_cast<unsigned char>(c)));
    }
  }
  if (depth != 0) return PgColumnKind::kOther;
  constexpr std::string_view kCatalog = "pg_catalog.";
  if (words.compare(0, kCatalog.size(), kCatalog) == 0) {
    words.erase(0, kCatalog.size());
  }
  struct Name {
    std::string_view name;
    PgColumnKind kind;
  };
  static constexpr Name kNames[] = {
      {"date", PgColumnKind::kDate},
      {"timestamp", PgColumnKind::kTimestamp},
      {"timestamp without time zone", PgColumnKind::kTimestamp},
      {"timestamptz", PgColumnKind::kTimestampTz},
      {"timestamp with time zone", PgColumnKind::kTimestampTz},
      {"text", PgColumnKind::kText},
      {"varchar", PgColumnKind::kText},
      {"character varying", PgColumnKind::kText},
      {"smallint", PgColumnKind::kInteger},
      {"integer", PgColumnKind::kInteger},
      {"int", PgColumnKind::kInteger},
      {"bigint", PgColumnKind::kInteger},
      {"int2", PgColumnKind::kInteger},
      {"int4", PgColumnKind::kInteger},
      {"int8", PgColumnKind::kInteger},
      {"smallserial", PgColumnKind::kInteger},
      {"serial", PgColumnKind::kInteger},
      {"bigserial", PgColumnKind::kInteger},
      {"serial2", PgColumnKind::kInteger},
      {"serial4", PgColumnKind::kInteger},
      {"serial8", PgColumnKind::kInteger},
  };
  for (const Name& n : kNames) {
    if (words == n.name) return n.kind;
  }
  return PgColumnKind::kOther;
}

std::vector<std::string> PartitionFunctionSql(std::string_view schema) {
  return {Instantiate(kTwoArgumentFunction, schema),
          Instantiate(kThreeArgumentFunction, schema)};
}

PgPartitionColumns PartitionColumnsOf(const DatasetSpec& ds, std::string column,
                                      PgColumnKind kind, std::string key_column,
                                      PgColumnKind key_kind) {
  PgPartitionColumns out;
  out.layout = ds.layout();
  out.column = std::move(column);
  out.kind = kind;
  if (ds.two_dimensional()) {
    out.key_column = std::move(key_column);
    out.key_kind = key_kind;
  }
  return out;
}

absl::Status CheckPartitionColumns(const PgPartitionColumns& columns) {
  const Grain grain = columns.layout.grain;
  if (grain == Grain::kNone) return absl::OkStatus();
  if (columns.column.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a ", LayoutName(columns.layout),
                     " partition needs its partition column"));
  }
  if (grain == Grain::kKey) {
    if (columns.layout.two_dimensional()) {
      return absl::InvalidArgumentError(
          "a time x key layout needs a time grain, not key");
    }
    if (!IsKeyKind(columns.kind)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "key partition column ", columns.column, " is of kind ",
          PgColumnKindName(columns.kind),
          "; a key column must be TEXT, VARCHAR or an integer type "
          "(SMALLINT, INTEGER, BIGINT)"));
    }
    return absl::OkStatus();
  }
  if (!IsTimeKind(columns.kind)) {
    return absl::InvalidArgumentError(absl::StrCat(
        GrainName(grain), " partition column ", columns.column, " is of kind ",
        PgColumnKindName(columns.kind), "; a ", GrainName(grain),
        " column must be DATE, TIMESTAMP, TIMESTAMPTZ, TEXT or VARCHAR"));
  }
  if (!columns.layout.two_dimensional()) return absl::OkStatus();
  if (columns.key_column.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a ", LayoutName(columns.layout), " partition needs its key column"));
  }
  if (!IsKeyKind(columns.key_kind)) {
    return absl::InvalidArgumentError(
        absl::StrCat("key column ", columns.key_column, " is of kind ",
                     PgColumnKindName(columns.key_kind),
                     "; a key column must be TEXT, VARCHAR or an integer type "
                     "(SMALLINT, INTEGER, BIGINT)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<PgCondition> MembershipCondition(
    const PgPartitionColumns& columns, std::string_view schema,
    int first_parameter) {
  RETURN_IF_ERROR(CheckPartitionColumns(columns));
  if (first_parameter < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "parameters are numbered from $1, not $", first_parameter));
  }
  const Grain grain = columns.layout.grain;
  if (grain == Grain::kNone) return PgCondition{"TRUE", 0};
  int next = first_parameter;
  std::string sql;
  if (grain == Grain::kKey) {
    sql = KeyCondition(columns.kind, columns.column, &next);
  } else {
    sql = TimeCondition(grain, columns.kind, columns.column,
                        columns.byte_ordered, schema, &next);
    if (columns.layout.two_dimensional()) {
      absl::StrAppend(
          &sql, " AND ",
          KeyCondition(columns.key_kind, columns.key_column, &next));
    }
  }
  return PgCondition{absl::StrCat("(", sql, ")"), next - first_parameter};
}

absl::StatusOr<std::vector<PgValue>> MembershipValues(
    const PgPartitionColumns& columns, std::string_view partition) {
  RETURN_IF_ERROR(CheckPartitionColumns(columns));
  RETURN_IF_ERROR(ValidatePartition(columns.layout, partition));
  const Grain grain = columns.layout.grain;
  std::vector<PgValue> out;
  if (grain == Grain::kNone) return out;
  if (grain == Grain::kKey) {
    out.push_back(KeyValue(columns.kind, partition));
    return out;
  }
  if (!columns.layout.two_dimensional()) {
    RETURN_IF_ERROR(AppendTimeValues(grain, columns.kind, partition, &out));
    return out;
  }
  ASSIGN_OR_RETURN(TimeKey tk, SplitTimeKey(columns.layout, partition));
  RETURN_IF_ERROR(AppendTimeValues(grain, columns.kind, tk.time, &out));
  out.push_back(KeyValue(columns.key_kind, tk.key));
  return out;
}

absl::StatusOr<std::string> PartitionExpression(
    const PgPartitionColumns& columns, std::string_view schema) {
  RETURN_IF_ERROR(CheckPartitionColumns(columns));
  const Grain grain = columns.layout.grain;
  const std::string function =
      absl::StrCat(Sv(schema), ".", kPartitionFunction);
  const std::string& col = columns.column;
  std::string expr;
  if (grain == Grain::kNone) {
    expr = "''::text";
  } else if (grain == Grain::kKey) {
    expr = columns.kind == PgColumnKind::kInteger
               ? absl::StrCat("(", col, ")::text")
               : absl::StrCat(function, "('key', ", CText(col), ")");
  } else if (!columns.layout.two_dimensional()) {
    expr = columns.kind == PgColumnKind::kText
               ? absl::StrCat(function, "('", GrainName(grain), "', ",
                              CText(col), ")")
               : absl::StrCat(
                     "CASE WHEN ", InSupportedRange(grain, columns.kind, col),
                     " THEN ", FormatTyped(grain, columns.kind, col), " END");
  } else if (columns.kind == PgColumnKind::kText) {
    expr = absl::StrCat(function, "('", GrainName(grain), "', ", CText(col),
                        ", ", CText(columns.key_column), ")");
  } else {
    // A typed time column: the time part inline, the key checked as the
    // key grain's value without '|' (an integer's text always is one).
    const std::string& key = columns.key_column;
    if (columns.key_kind == PgColumnKind::kInteger) {
      expr =
          absl::StrCat("CASE WHEN ", InSupportedRange(grain, columns.kind, col),
                       " THEN ", FormatTyped(grain, columns.kind, col),
                       " || '|' || (", key, ")::text END");
    } else {
      expr = absl::StrCat(
          "CASE WHEN ", InSupportedRange(grain, columns.kind, col),
          " AND pg_catalog.strpos(", CText(key), ", '|') = 0 THEN ",
          FormatTyped(grain, columns.kind, col), " || '|' || ", function,
          "('key', ", CText(key), ") END");
    }
  }
  return absl::StrCat("((", expr, ") COLLATE \"C\")");
}

}  // namespace backfill::postgres
