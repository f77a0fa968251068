// CliTerms: the API's names in backquotes said as backfillctl's flags and
// commands.

#include "client/cli_terms.h"
#include "gtest/gtest.h"

namespace backfill::cli {
namespace client_cli_terms_test {
namespace {

TEST(CliTermsTest, FieldsBecomeTheirFlags) {
  EXPECT_EQ(FlagOfField("request.reason"), "--reason");
  EXPECT_EQ(FlagOfField("reason"), "--reason");
  EXPECT_EQ(FlagOfField("request.from_partition"), "--from");
  EXPECT_EQ(FlagOfField("request.to_partition"), "--to");
  EXPECT_EQ(FlagOfField("request.partitions[12]"), "--partitions");
  EXPECT_EQ(FlagOfField("request.keys[0]"), "--keys");
  EXPECT_EQ(FlagOfField("request.exclude_downstream"), "--no-downstream");
  EXPECT_EQ(FlagOfField("override_validation"), "--override");
  EXPECT_EQ(FlagOfField("idempotency_key"), "--idempotency-key");
  EXPECT_EQ(FlagOfField("page_size"), "--limit");
  EXPECT_EQ(FlagOfField("backfill_id"), "JOB");
  EXPECT_EQ(FlagOfField("freshness[1]"), "--only");
  EXPECT_EQ(FlagOfField("request.no_such_field"), std::nullopt);
  EXPECT_EQ(FlagOfField(""), std::nullopt);
}

TEST(CliTermsTest, MethodsBecomeTheirCommands) {
  EXPECT_EQ(CommandOfMethod("ListDatasets"), "backfillctl datasets");
  EXPECT_EQ(CommandOfMethod("GetBackfill"), "backfillctl status");
  EXPECT_EQ(CommandOfMethod("ExplainPartition"), "backfillctl why");
  EXPECT_EQ(CommandOfMethod("ListDatasetPartitions"), "backfillctl freshness");
  EXPECT_EQ(CommandOfMethod("Frobnicate"), std::nullopt);
}

TEST(CliTermsTest, MessagesAreSaidInTheCliTerms) {
  EXPECT_EQ(InCliTerms("a reason is required: say in `reason` why this "
                       "backfill runs"),
            "a reason is required: say in --reason why this backfill runs");
  EXPECT_EQ(InCliTerms("give either a range (`from_partition`, "
                       "`to_partition`) or a partition list (`partitions`), "
                       "not both"),
            "give either a range (--from, --to) or a partition list "
            "(--partitions), not both");
  EXPECT_EQ(InCliTerms("name a declared dataset (`ListDatasets` lists them)"),
            "name a declared dataset (backfillctl datasets lists them)");
  // A name the CLI has no term for loses only its quotes.
  EXPECT_EQ(InCliTerms("declare `entity_key: COLUMN` in the pipeline"),
            "declare entity_key: COLUMN in the pipeline");
  // Text without names, or with an unmatched quote, stays as it is.
  EXPECT_EQ(InCliTerms("no job bf-3"), "no job bf-3");
  EXPECT_EQ(InCliTerms("a stray ` quote"), "a stray ` quote");
  EXPECT_EQ(InCliTerms(""), "");
}

}  // namespace
}  // namespace client_cli_terms_test
}  // namespace backfill::cli
