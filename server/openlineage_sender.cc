#include "server/openlineage_sender.h"

#include <unistd.h>

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/clock.h"
#include "openlineage/emitter.h"
#include "platform/curl_http_client.h"
#include "server/log_text.h"
#include "server/openlineage_metrics.h"
#include "spdlog/spdlog.h"

namespace backfill {
namespace {

// The emitter's options for `options` and the warehouse the catalog names.
openlineage::EmitterOptions EmitterOptionsFor(
    const OpenLineageSenderOptions& options, const LiveCatalog* catalog) {
  openlineage::EmitterOptions lineage_options;
  lineage_options.url = options.url;
  lineage_options.job_namespace = options.job_namespace;
  // The warehouse's dataset namespace. SQLite: sqlite://, this host's name
  // and the file's absolute path, so that two daemons' warehouses at the
  // same path on different hosts are different datasets. PostgreSQL:
  // postgres://HOST:PORT, the server's own address, and tables named
  // DATABASE.SCHEMA.TABLE (OpenLineage's naming spec).
  if (catalog->Get()->warehouse().engine == "sqlite") {
    char host[256] = {};
    const bool has_host = gethostname(host, sizeof host - 1) == 0;
    lineage_options.dataset_namespace = openlineage::WarehouseNamespace(
        has_host ? host : "", options.warehouse_location);
  } else {
    lineage_options.dataset_namespace = options.warehouse_location;
    lineage_options.dataset_name_prefix = options.warehouse_name_prefix;
  }
  lineage_options.version = options.version;
  return lineage_options;
}

}  // namespace

OpenLineageSender::OpenLineageSender(OpenLineageSenderOptions options,
                                     const LiveCatalog* catalog,
                                     StateStore* store,
                                     prometheus::Registry& registry)
    : options_(std::move(options)) {
  openlineage::EmitterOptions lineage_options =
      EmitterOptionsFor(options_, catalog);
  dataset_namespace_ = lineage_options.dataset_namespace;
  http_ = std::make_unique<CurlHttpClient>();
  clock_ = std::make_unique<SystemClock>();
  metrics_ = std::make_unique<OpenLineageMetrics>(registry);
  emitter_ = std::make_unique<openlineage::OpenLineageEmitter>(
      std::move(lineage_options), catalog, store, http_.get(), clock_.get(),
      metrics_.get());
}

OpenLineageSender::~OpenLineageSender() = default;

absl::Status OpenLineageSender::Start() {
  if (absl::Status s = emitter_->Start(); !s.ok()) {
    return absl::Status(
        s.code(), absl::StrCat("cannot start OpenLineage: ", s.message()));
  }
  spdlog::info(
      "OpenLineage: sending RunEvents to {}, namespace {}, datasets in {}",
      LogText(
          openlineage::LineageEndpoint(options_.url).value_or(options_.url)),
      LogText(options_.job_namespace), LogText(dataset_namespace_));
  return absl::OkStatus();
}

void OpenLineageSender::Shutdown() { emitter_->Shutdown(); }

JobObserver* OpenLineageSender::observer() const { return emitter_.get(); }

}  // namespace backfill
