// Transform parameters: which named parameters a transform may use. Every
// transform gets :partition_start, :partition_end and :partition bound; what
// a dataset declares allows more (ExtraParameters). The pipeline loader, the
// static SQL check and the engine all judge a parameter with
// ParameterProblem, so that they accept and refuse the same ones with the
// same words. Pure functions; thread-safe.

#ifndef BACKFILL_CORE_MODEL_TRANSFORM_PARAMETERS_H_
#define BACKFILL_CORE_MODEL_TRANSFORM_PARAMETERS_H_

#include <string>
#include <string_view>

#include "core/model/catalog.h"

namespace backfill {

// The parameters a transform may use besides the three every one gets.
struct ExtraParameters {
  bool window_start = false;   // :window_start, with a `lookback` upstream
  bool keys = false;           // :keys, with an `entity_key`
  bool partition_key = false;  // :partition_key, partitioned by time x key
};

// What `dataset` declares allows.
ExtraParameters ExtraParametersOf(const DatasetSpec& dataset);

// "" when a transform allowed `extra` may use the parameter `name` (with its
// colon, ":partition"); otherwise a sentence saying why not and what is
// bound, starting "the WHAT uses the parameter NAME" (an assertion's SQL
// gets the same three parameters as a transform, and no extras).
std::string ParameterProblem(std::string_view name,
                             const ExtraParameters& extra,
                             std::string_view what = "transform");

}  // namespace backfill

#endif  // BACKFILL_CORE_MODEL_TRANSFORM_PARAMETERS_H_
