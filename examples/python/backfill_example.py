#!/usr/bin/env python3
"""A short backfilld client in Python, generated from the proto.

It lists the datasets, reads the grain of one (an enum), plans a
backfill, shows how a refused call's details are read (google.rpc.Status
in grpc-status-details-bin: an ErrorInfo with the reason, a BadRequest
naming the refused fields), then submits the backfill and follows it to
its end.

Usage:
  examples/python/generate.sh /tmp/backfill-py
  PYTHONPATH=/tmp/backfill-py python3 examples/python/backfill_example.py \
      --server 127.0.0.1:50051 --dataset daily_revenue \
      --from 2025-06-01 --to 2025-07-01 [--token TOKEN]

It prints one "key: value" line per fact, and exits 0 only when the
backfill SUCCEEDED.
"""

import argparse
import sys
import uuid

import grpc
from google.rpc import error_details_pb2, status_pb2

from backfill.v1 import backfill_pb2, backfill_pb2_grpc

STATUS_DETAILS_KEY = "grpc-status-details-bin"
TERMINAL = {
    backfill_pb2.BACKFILL_STATE_SUCCEEDED,
    backfill_pb2.BACKFILL_STATE_FAILED,
    backfill_pb2.BACKFILL_STATE_CANCELLED,
    backfill_pb2.BACKFILL_STATE_VALIDATION_FAILED,
    backfill_pb2.BACKFILL_STATE_ROLLED_BACK,
    backfill_pb2.BACKFILL_STATE_DOWNSTREAM_UNHEALTHY,
}


def error_details(error):
    """The ErrorInfo and the BadRequest field violations of a failed call."""
    info, fields = None, []
    for key, value in error.trailing_metadata() or ():
        if key != STATUS_DETAILS_KEY:
            continue
        status = status_pb2.Status.FromString(value)
        for detail in status.details:
            if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                info = error_details_pb2.ErrorInfo()
                detail.Unpack(info)
            elif detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
                bad_request = error_details_pb2.BadRequest()
                detail.Unpack(bad_request)
                fields += [v.field for v in bad_request.field_violations]
    return info, fields


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default="127.0.0.1:50051")
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--from", dest="from_partition", required=True)
    parser.add_argument("--to", dest="to_partition", required=True)
    parser.add_argument("--token", default="")
    args = parser.parse_args()

    metadata = [("authorization", "Bearer " + args.token)] if args.token else []
    channel = grpc.insecure_channel(args.server)
    stub = backfill_pb2_grpc.BackfillServiceStub(channel)

    datasets = stub.ListDatasets(backfill_pb2.ListDatasetsRequest(),
                                 metadata=metadata, timeout=30)
    print("datasets:", ",".join(d.name for d in datasets.datasets))
    # Grains, kinds and mappings are enums: compare values, print names.
    target = stub.GetDataset(backfill_pb2.GetDatasetRequest(name=args.dataset),
                             metadata=metadata, timeout=30)
    print("grain:", backfill_pb2.Grain.Name(target.grain))

    request = backfill_pb2.BackfillRequest(
        dataset=args.dataset,
        from_partition=args.from_partition,
        to_partition=args.to_partition)
    plan = stub.PlanBackfill(backfill_pb2.PlanBackfillRequest(request=request),
                             metadata=metadata, timeout=60)
    print("planned_partitions:", plan.total_partitions)
    print("cost_ratio: %.4f" % plan.cost.ratio)

    # Refused: a submit needs a reason. The error says why, in details.
    try:
        stub.SubmitBackfill(
            backfill_pb2.SubmitBackfillRequest(request=request),
            metadata=metadata, timeout=60)
        print("refused: no")
    except grpc.RpcError as error:
        info, fields = error_details(error)
        print("refused:", error.code().name)
        print("reason:", info.reason if info else "")
        print("domain:", info.domain if info else "")
        print("fields:", ",".join(fields))

    request.reason = "refunds were not subtracted"
    submitted = stub.SubmitBackfill(
        backfill_pb2.SubmitBackfillRequest(
            request=request, idempotency_key=str(uuid.uuid4())),
        metadata=metadata, timeout=60)
    job = submitted.backfill
    print("backfill:", job.id)
    for update in stub.WatchBackfill(
            backfill_pb2.WatchBackfillRequest(id=job.id),
            metadata=metadata, timeout=600):
        job = update
        if job.state in TERMINAL:
            break
    print("state:", backfill_pb2.BackfillState.Name(job.state))
    print("published:", job.partitions.published)
    return 0 if job.state == backfill_pb2.BACKFILL_STATE_SUCCEEDED else 1


if __name__ == "__main__":
    sys.exit(main())
