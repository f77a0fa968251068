// wire_text: makes the free text of an outgoing backfill.v1 message fit for
// protobuf `string` fields. Texts the daemon stores can hold bytes that are
// not UTF-8 (a warehouse value quoted in a validation message, a partition
// key, an error an engine returned); protobuf refuses to serialize such a
// message, so a single bad byte in an append-only audit event would fail
// every export that includes it. The converters (server/proto_convert.h,
// server/governance_convert.h) pass each message they build through
// MakeStringsUtf8, which rewrites every ill-formed byte of every string
// field, nested messages and repeated fields included, with
// text::ValidUtf8 ("\xNN"); well-formed text is left untouched.
//
// Free functions over the message they are given; they keep no state and
// are thread-safe for distinct messages.

#ifndef BACKFILL_SERVER_WIRE_TEXT_H_
#define BACKFILL_SERVER_WIRE_TEXT_H_

#include "google/protobuf/message.h"

namespace backfill {

// Makes every `string` field of `message` (and of the messages it holds)
// well-formed UTF-8. `bytes` fields are left as they are.
void MakeStringsUtf8(google::protobuf::Message* message);

}  // namespace backfill

#endif  // BACKFILL_SERVER_WIRE_TEXT_H_
