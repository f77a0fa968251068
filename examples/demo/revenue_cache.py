#!/usr/bin/env python3
"""A small read-through cache in front of the demo's daily_revenue table.

It stands for the caches and extracts between a warehouse and the people who
read it: it answers GET /value?day=YYYY-MM-DD with {"revenue": <the day's
total over all regions>}, read once from the published daily_revenue table
and then kept in memory, so it goes on serving the old numbers after a
backfill until it is told otherwise. POST /invalidate with the JSON body
{"dataset": ..., "job": ..., "partitions": [...]} (what backfilld sends after
a publish) drops those days, and the next GET reads them again.

With --ignore-invalidations (or REVENUE_CACHE_IGNORE_INVALIDATIONS=1) it
answers the invalidation 200 but keeps its values: the broken cache that
backfilld's confirmation must catch.

Standard library only. It opens the warehouse read-only and serves on
127.0.0.1; with --port 0 the system picks a free port, written to
--port-file once the cache listens. Stop it with SIGTERM or Ctrl-C.

Usage: revenue_cache.py --warehouse PATH [--port N] [--port-file PATH]
                        [--ignore-invalidations]
"""

import argparse
import datetime
import json
import os
import signal
import sqlite3
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit
from urllib.request import pathname2url

MAX_BODY = 1 << 20


def valid_day(text):
    try:
        return datetime.date.fromisoformat(text).isoformat() == text
    except (TypeError, ValueError):
        return False


class Cache:
    """The day -> revenue values; thread-safe (one lock around the dict)."""

    def __init__(self, warehouse, ignore_invalidations):
        self.uri = "file:%s?mode=ro" % pathname2url(warehouse)
        self.ignore_invalidations = ignore_invalidations
        self.values = {}
        self.lock = threading.Lock()

    def get(self, day):
        with self.lock:
            if day in self.values:
                return self.values[day], True
        db = sqlite3.connect(self.uri, uri=True)
        try:
            (revenue,) = db.execute(
                "SELECT SUM(revenue) FROM daily_revenue WHERE ds = ?", (day,)
            ).fetchone()
        finally:
            db.close()
        with self.lock:
            self.values.setdefault(day, revenue)
            return self.values[day], False

    def invalidate(self, days):
        if self.ignore_invalidations:
            return 0
        with self.lock:
            return sum(1 for d in days if self.values.pop(d, None) is not None)


class Handler(BaseHTTPRequestHandler):
    server_version = "revenue-cache/1"

    def reply(self, status, obj):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        url = urlsplit(self.path)
        if url.path != "/value":
            return self.reply(404, {"error": "unknown path %s" % url.path})
        days = parse_qs(url.query).get("day", [])
        if len(days) != 1 or not valid_day(days[0]):
            return self.reply(400, {"error": "day must be one YYYY-MM-DD"})
        try:
            revenue, hit = self.server.cache.get(days[0])
        except sqlite3.Error as e:
            return self.reply(503, {"error": "warehouse: %s" % e})
        self.log_message("GET %s -> %r (%s)", days[0], revenue,
                         "cached" if hit else "read")
        self.reply(200, {"revenue": revenue})

    def do_POST(self):
        if urlsplit(self.path).path != "/invalidate":
            return self.reply(404, {"error": "unknown path %s" % self.path})
        try:
            length = int(self.headers.get("Content-Length", "0"))
            if not 0 < length <= MAX_BODY:
                raise ValueError("body must be 1 byte to 1 MiB")
            body = json.loads(self.rfile.read(length))
            days = body.get("partitions") if isinstance(body, dict) else None
            if not isinstance(days, list) or not all(valid_day(d) for d in days):
                raise ValueError("partitions must be a list of YYYY-MM-DD")
        except (ValueError, TypeError) as e:
            return self.reply(400, {"error": "bad invalidation: %s" % e})
        dropped = self.server.cache.invalidate(days)
        ignored = self.server.cache.ignore_invalidations
        self.log_message("invalidate %s %s: %d days, %s", body.get("dataset"),
                         body.get("job"), len(days),
                         "IGNORED" if ignored else "%d dropped" % dropped)
        self.reply(200, {"dropped": dropped, "ignored": ignored})

    def log_request(self, code="-", size="-"):
        pass  # do_GET and do_POST log what they did

    def log_message(self, fmt, *args):
        sys.stderr.write("revenue_cache: %s\n" % (fmt % args))
        sys.stderr.flush()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--warehouse", required=True)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--port-file")
    p.add_argument(
        "--ignore-invalidations",
        action="store_true",
        default=os.environ.get("REVENUE_CACHE_IGNORE_INVALIDATIONS") == "1",
    )
    args = p.parse_args()
    if not os.path.isfile(args.warehouse):
        p.error("no warehouse at %s" % args.warehouse)

    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    server.cache = Cache(os.path.abspath(args.warehouse),
                         args.ignore_invalidations)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    port = server.server_address[1]
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % port)
        os.replace(tmp, args.port_file)
    sys.stderr.write("revenue_cache: listening on 127.0.0.1:%d%s\n" % (
        port, " (ignoring invalidations)" if args.ignore_invalidations else ""))
    sys.stderr.flush()
    try:
        server.serve_forever()
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
