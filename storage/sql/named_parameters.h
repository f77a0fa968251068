// Named parameters for PostgreSQL: ToPositional turns a statement written
// with named parameters (`:partition_start`, `:partition`, any `:name`), as
// every transform is, into the same statement with libpq's positional
// parameters $1..$n, and says which name each $i stands for. SQLite binds
// `:name` itself; the PostgreSQL engine translates once, prepares the text
// and binds its values in the order of `names`. Which names a statement may
// use is not judged here (core/model/transform_parameters.h does that).
//
// A real lexer of PostgreSQL's SQL finds the parameters, so that nothing
// inside a literal or a comment is one. It follows PostgreSQL's own
// lexical rules for:
//   'it''s'       standard strings ('' is a quote; a backslash is a byte
//                 like any other: standard_conforming_strings is on, as it
//                 is by default since PostgreSQL 9.1). B'..', X'..', N'..'
//                 and U&'..' lex the same way.
//   E'it\'s'      escape strings (e or E directly before the quote, not as
//                 the end of a longer word): a backslash escapes the next
//                 byte, and '' is a quote too.
//   'a'<newline>'b'  a string continues in the next quoted segment when
//                 only whitespace with at least one newline (and -- comments)
//                 lies between them; an escape string's continuation keeps
//                 its backslash escapes.
//   "a""b"        quoted identifiers (also U&"..").
//   $$..$$, $tag$..$tag$  dollar-quoted strings. A tag is [A-Za-z_] or a
//                 byte >= 0x80, then those or digits; it ends at the first
//                 occurrence of the same delimiter. A '$' inside a word
//                 (x$$y, a$1) is part of the word and starts nothing.
//   -- ...        line comments, to the next \n or \r.
//   /* .. */      block comments, which nest: /* /* */ */ is one comment.
//
// What is a parameter, outside literals and comments:
//   - ':' directly followed by a name: a byte [A-Za-z_] or any byte >= 0x80,
//     then every following byte of [A-Za-z0-9_$] or >= 0x80. Bytes >= 0x80
//     count as SQLite's tokenizer counts them (and as PostgreSQL counts them in
//     identifiers), so `:größe` is one name and
//     `:partitionü` is not `:partition`; likewise '$' continues a name
//     (`:a$1`) in both. Names are compared byte for byte (`:a` and `:A`
//     are two parameters, as in SQLite).
//   - `::` is the cast operator and is never part of a parameter:
//     `:partition::date` is the parameter `:partition` cast to date, and
//     `x::date` has none. Left to right, `:::x` is `::` then `:x`.
//     (SQLite would read `:a::b` as one Tcl-style name; it has no `::`
//     cast, so SQL meant for both engines does not contain it.)
//   - `:a:b` is two parameters, `:a` then `:b` (as in SQLite).
//   - In an array slice, a bare column right after the ':' is read as a
//     parameter too: `a[1:n]` has the parameter `:n` (and PostgreSQL then
//     refuses `a[1$1]`). Write `a[1: n]`.
// What is not a parameter, and is left for PostgreSQL to judge:
//   - ':' followed by anything else: `:=` (named arguments), a digit or
//     a space (array slices `a[1:2]`, `a[1: n]`), ')' or ']', the end of
//     the text. Unlike SQLite, `:1` and `:$x` are not names, since `a[1:2]`
//     is a slice (nor is SQLite's Tcl-style `:a(b)` one name).
// Errors, INVALID_ARGUMENT with what was found and its 0-based byte offset:
//   - an unterminated quoted string, escape string, quoted identifier,
//     dollar-quoted string or block comment (offset of its opening);
//   - a positional parameter `$1` (a '$' starting a token, then a digit):
//     $1..$n are given out here, so a $1 already in the text would stand
//     for whichever name happens to come first;
//   - a parameter directly after a word, `lo:hi`: PostgreSQL would read
//     `lo$1` as one identifier, since '$' continues identifiers. In an
//     array slice `a[lo:hi]` (which this would be), write `a[lo: hi]`.
//   - a ':' directly followed by a quote, `:'name'` or `:"name"`: psql's
//     quoted variable forms, which name no parameter here (values are
//     always bound; write `:name`). In a slice, put a space after the ':'.
//   - more than kMaxParameters distinct names.
//
// Every byte but the parameters' is kept as it is: comments, literals and
// whitespace are untouched, and writing each $i back as names[i-1] gives
// the input again. The same name always gets the same $i; numbers are
// given in the order of each name's first appearance.
//
// A pure function of its argument; the result owns its strings and refers
// to nothing of `sql`. Thread-safe.

#ifndef BACKFILL_STORAGE_SQL_NAMED_PARAMETERS_H_
#define BACKFILL_STORAGE_SQL_NAMED_PARAMETERS_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace backfill::sql {

// The most parameters one statement can have: the count is 16 bits in
// PostgreSQL's protocol.
inline constexpr size_t kMaxParameters = 65535;

struct PositionalSql {
  std::string text;                // the statement with $1..$n
  std::vector<std::string> names;  // names[i] (with its colon) is $i+1
  // The quoting forms the text uses beyond standard strings and quoted
  // identifiers (for callers that accept only those, e.g. a client's
  // predicate that is checked by simpler rules elsewhere).
  bool has_dollar_quote = false;   // $$..$$ or $tag$..$tag$
  bool has_escape_string = false;  // E'...'
};

// `sql` with each named parameter replaced by $n, or INVALID_ARGUMENT as the
// comment above says. Text without parameters comes back as it is, with no
// names.
absl::StatusOr<PositionalSql> ToPositional(std::string_view sql);

}  // namespace backfill::sql

#endif  // BACKFILL_STORAGE_SQL_NAMED_PARAMETERS_H_
