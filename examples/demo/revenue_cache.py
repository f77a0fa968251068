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

The warehouse is a SQLite file (--warehouse PATH) or a PostgreSQL database
(--postgres DSN, a libpq connection string without a password: libpq reads
it from PGPASSWORD, ~/.pgpass or PGPASSFILE), read through one psql session
that stays open, so that the cache needs no driver.

Standard library only (and psql with --postgres). It reads the warehouse
read-only and serves on 127.0.0.1; with --port 0 the system picks a free
port, written to --port-file once the cache listens. Stop it with SIGTERM
or Ctrl-C.

Usage: revenue_cache.py (--warehouse PATH | --postgres DSN) [--port N]
                        [--port-file PATH] [--ignore-invalidations]
"""

import argparse
import datetime
import json
import os
import select
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit
from urllib.request import pathname2url

MAX_BODY = 1 << 20
PSQL_TIMEOUT_SECONDS = 30


class WarehouseError(Exception):
    """The warehouse could not be read."""


def valid_day(text):
    try:
        return datetime.date.fromisoformat(text).isoformat() == text
    except (TypeError, ValueError):
        return False


class SqliteWarehouse:
    """A SQLite warehouse file, opened read-only for each read."""

    def __init__(self, path):
        self.uri = "file:%s?mode=ro" % pathname2url(path)

    def day_revenue(self, day):
        try:
            db = sqlite3.connect(self.uri, uri=True)
            try:
                (revenue,) = db.execute(
                    "SELECT SUM(revenue) FROM daily_revenue WHERE ds = ?",
                    (day,)).fetchone()
            finally:
                db.close()
        except sqlite3.Error as e:
            raise WarehouseError(str(e)) from e
        return revenue


class PostgresWarehouse:
    """A PostgreSQL warehouse, read through one psql session that stays open,
    as a cache keeps its connection (psql, so that no driver is needed). The
    session starts on the first read, and again on the next read after it
    failed or did not answer within PSQL_TIMEOUT_SECONDS; reads take turns.
    Its transactions are read-only (default_transaction_read_only)."""

    END = "__revenue_cache_end__"
    # One read: the day's total after a marker (NULL as "null"), then a line
    # that ends the answer and says whether the query failed. `day` is a
    # valid YYYY-MM-DD, so it is safe between quotes.
    QUERY = ("SELECT 'revenue=' || COALESCE(SUM(revenue)::text, 'null') "
             "FROM daily_revenue WHERE ds = '%s';\n"
             "\\echo " + END + " :ERROR\n")

    def __init__(self, psql, dsn):
        self.argv = [psql, "-X", "-q", "-A", "-t", "-d", dsn]
        self.env = dict(os.environ)
        self.env["PGOPTIONS"] = (self.env.get("PGOPTIONS", "") +
                                 " -c default_transaction_read_only=on")
        self.proc = None
        self.pending = b""
        self.lock = threading.Lock()

    def close(self):
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
        self.pending = b""

    def _readline(self, deadline):
        while b"\n" not in self.pending:
            left = deadline - time.monotonic()
            if left <= 0:
                raise WarehouseError("psql did not answer within %d s" %
                                     PSQL_TIMEOUT_SECONDS)
            ready, _, _ = select.select([self.proc.stdout], [], [], left)
            if ready:
                chunk = os.read(self.proc.stdout.fileno(), 65536)
                if not chunk:
                    raise WarehouseError("psql exited with status %d" %
                                         self.proc.wait())
                self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        return line.decode("utf-8", "replace")

    def day_revenue(self, day):
        if not valid_day(day):
            raise WarehouseError("not a day: %r" % day)
        with self.lock:
            lines = []
            try:
                if self.proc is None:
                    # psql's messages (errors, notices) come on stdout too,
                    # before the end line.
                    self.proc = subprocess.Popen(
                        self.argv, stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                        env=self.env)
                self.proc.stdin.write((self.QUERY % day).encode())
                self.proc.stdin.flush()
                deadline = time.monotonic() + PSQL_TIMEOUT_SECONDS
                while True:
                    line = self._readline(deadline)
                    if line.startswith(self.END):
                        break
                    lines.append(line)
            except (OSError, WarehouseError) as e:
                self.close()
                raise WarehouseError("; ".join(lines + [str(e)])) from e
        values = [l for l in lines if l.startswith("revenue=")]
        if line != self.END + " false" or len(values) != 1:
            raise WarehouseError("; ".join(lines) or "psql printed no value")
        text = values[0][len("revenue="):]
        # PostgreSQL prints a double precision exactly (the shortest text
        # that reads back as the same number).
        return None if text == "null" else float(text)


class Cache:
    """The day -> revenue values; thread-safe (one lock around the dict)."""

    def __init__(self, warehouse, ignore_invalidations):
        self.warehouse = warehouse
        self.ignore_invalidations = ignore_invalidations
        self.values = {}
        self.lock = threading.Lock()

    def get(self, day):
        with self.lock:
            if day in self.values:
                return self.values[day], True
        revenue = self.warehouse.day_revenue(day)
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
        except WarehouseError as e:
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
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--warehouse", metavar="PATH",
                        help="the SQLite warehouse file")
    source.add_argument("--postgres", metavar="DSN",
                        help="the PostgreSQL warehouse's connection string")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--port-file")
    p.add_argument(
        "--ignore-invalidations",
        action="store_true",
        default=os.environ.get("REVENUE_CACHE_IGNORE_INVALIDATIONS") == "1",
    )
    args = p.parse_args()
    if args.warehouse is not None:
        if not os.path.isfile(args.warehouse):
            p.error("no warehouse at %s" % args.warehouse)
        warehouse = SqliteWarehouse(os.path.abspath(args.warehouse))
    else:
        psql = shutil.which("psql")
        if psql is None:
            p.error("--postgres reads the warehouse with psql, which is not "
                    "in PATH (Debian: apt-get install postgresql-client)")
        warehouse = PostgresWarehouse(psql, args.postgres)

    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    server.cache = Cache(warehouse, args.ignore_invalidations)
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
        if isinstance(warehouse, PostgresWarehouse):
            warehouse.close()


if __name__ == "__main__":
    main()
