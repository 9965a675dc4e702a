#!/usr/bin/env python3
"""Run memstate's canned queries over a Parquet dataset with DuckDB or Spark.

    scripts/parquet-query --engine duckdb --data DIR NAME [-p key=value ...] [--format csv]
    spark-submit scripts/parquet_query.py --engine spark --data DIR NAME ...

DIR is a dataset written by `memstate export --format parquet --out DIR`. NAME is a query of
queries/portable/ (--list shows them); its rows and columns are those of
`memstate report NAME --format csv` on the databases the dataset came from.

Parameters take the forms `report` takes, by the kind each query declares in its header
(`@param NAME KIND`, as memstate reads it): a snapshot is RUN:NODE:SEQ (split from the right, since
a run id may hold ':'), or `latest` (the latest snapshot of the memory's node when a memory is
given, else of the dataset's only node); a memory is
0x1e00000000000002; a run is RUN (default: the dataset's only run); a limit or an integer is N.
Each is checked against its kind (a whole number of 64 bits, a memory id) and then bound as a
parameter of the engine, never written into the SQL text: a snapshot gives :snapshot_run (text),
:snapshot_node and :snapshot_seq (integers), a memory gives :memory (text). DuckDB takes them as
$name, Spark as :name with `args` (Spark 3.5 or later), so a value holding quotes or backslashes
stays a value.

Each table of the dataset is registered as a view by its name, with `run` pinned as text and
`node` as a 64-bit integer, whatever the partition folders look like. A node partition is read as
its manifest (_memstate_nodes/run=R/node=N.json) names it, so an export at work is seen as it was
before or after, whole; an export that died or failed part-way (its record in _memstate_exports/
not locked by a live process) makes the dataset refused by name until it is run again.

Needs DuckDB (pip install duckdb) or PySpark (pip install pyspark, with Java 17 or later).
Exit status: 0 ok, 2 bad usage or a dataset that cannot be read.
"""

import argparse
import csv
import decimal
import fcntl
import glob
import json
import math
import os
import re
import sys
import time

HERE = os.path.dirname(os.path.realpath(__file__))
QUERIES = os.path.join(HERE, os.pardir, "queries", "portable")
MARKER = "_memstate_dataset.json"
LAYOUT_VERSION = 2
NODES = "_memstate_nodes"
EXPORTS = "_memstate_exports"
NODE_TABLES = ["snapshots", "memories", "memory_stats", "allocation_spans", "hole_spans", "failed_requests"]
RUN_TABLES = ["objects", "allocation_objects"]


class Refused(Exception):
    """Bad usage or an unreadable dataset: printed as `error: ...`, exit status 2."""


def read_query(name, folder):
    path = os.path.join(folder, name + ".sql")
    if not re.fullmatch(r"[a-z0-9-]+", name) or not os.path.isfile(path):
        known = ", ".join(list_queries(folder))
        raise Refused(f"no portable query {name!r} (known: {known})")
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    params = {}
    for line in text.splitlines():
        match = re.match(r"--\s*@param\s+(\w+)\s+(\w+)\s*(.*)", line)
        if match:
            default = re.search(r"\(default (\d+)\)", match.group(3))
            params[match.group(1)] = (match.group(2), default.group(1) if default else None)
    return text, params


def list_queries(folder):
    return sorted(name[:-4] for name in os.listdir(folder) if name.endswith(".sql"))


def whole_number(value, what):
    """A parameter that must be a whole number of 64 bits, as a Python int."""
    if not re.fullmatch(r"-?\d+", value.strip()):
        raise Refused(f"{what}: {value!r} is not a whole number")
    number = int(value)
    if not -(2**63) <= number < 2**63:
        raise Refused(f"{what}: {value!r} does not fit in 64 bits")
    return number


def memory_text(value):
    match = re.fullmatch(r"0[xX]([0-9a-fA-F]{1,16})", value.strip())
    if not match:
        raise Refused(f"memory_id: {value!r} is not a memory id like 0x1e00000000000002")
    return "0x%016x" % int(match.group(1), 16)


class Engine:
    """One SQL engine with the dataset's tables registered as views."""

    def rows(self, query, values=None):
        """Column names and rows of a query whose :name markers take `values` as bound
        parameters (typed Python values, never SQL text)."""
        raise NotImplementedError


class DuckDB(Engine):
    def __init__(self, data, files):
        try:
            import duckdb
        except ImportError as error:
            raise Refused(f"DuckDB is not installed ({error}); pip install duckdb") from error
        self.connection = duckdb.connect()
        for table in NODE_TABLES + RUN_TABLES:
            # The files are handed to DuckDB by name (see dataset_files): a pattern built from
            # --data would read `refA` for `ref[A]`.
            listed = ", ".join("'" + name.replace("'", "''") + "'" for name in files[table])
            types = "{'run': VARCHAR, 'node': BIGINT}" if table in NODE_TABLES else "{'run': VARCHAR}"
            self.connection.execute(
                f"CREATE VIEW {table} AS SELECT * FROM read_parquet([{listed}], "
                f"hive_partitioning = true, hive_types = {types}, union_by_name = true)"
            )

    def rows(self, query, values=None):
        # DuckDB spells a named parameter $name.
        query, used = markers(query, values or {}, "$")
        cursor = self.connection.execute(query, used) if used else self.connection.execute(query)
        names = [column[0] for column in cursor.description]
        return names, cursor.fetchall()


class Spark(Engine):
    def __init__(self, data, files):
        try:
            from pyspark.sql import SparkSession
            from pyspark.sql import functions
        except ImportError as error:
            raise Refused(f"PySpark is not installed ({error}); pip install pyspark (and Java 17+)") from error
        builder = SparkSession.builder.appName("memstate parquet-query")
        # Under spark-submit (which starts this process and sets PYSPARK_GATEWAY_PORT) its
        # --master holds; run directly, Spark runs here, in local mode, unless SPARK_MASTER names
        # a cluster.
        if "PYSPARK_GATEWAY_PORT" not in os.environ:
            builder = builder.master(os.environ.get("SPARK_MASTER") or "local[*]")
        self.spark = (
            builder.config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "8")
            .config("spark.sql.session.timeZone", "UTC")
            # Folder names are never guessed into numbers or dates: run stays text.
            .config("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
            .getOrCreate()
        )
        self.spark.sparkContext.setLogLevel("ERROR")
        for table in NODE_TABLES + RUN_TABLES:
            folder = os.path.join(data, table)
            # Spark globs the paths it reads (Hadoop's patterns): glob characters are escaped
            # with a backslash so that `ref[A]` reads ref[A], not refA.
            paths = [hadoop_literal(name) for name in files[table]]
            frame = self.spark.read.option("basePath", folder).parquet(*paths)
            if table in NODE_TABLES:
                frame = frame.withColumn("node", functions.col("node").cast("bigint"))
            frame = frame.withColumn("run", functions.col("run").cast("string"))
            frame.createOrReplaceTempView(table)

    def rows(self, query, values=None):
        query, used = markers(query, values or {}, ":")
        frame = self.spark.sql(query, args=used) if used else self.spark.sql(query)
        names = frame.columns
        return names, [tuple(row) for row in frame.collect()]


def dataset_files(data):
    """Per table, the files that are the dataset now: for each node partition, those its manifest
    names (a node exported by memstate before manifests, layout 1, has part-0.parquet and no
    manifest); for the run tables, each run's part-0.parquet. Listed with the folder's own glob
    characters escaped. An export that died part-way is refused by name."""
    with open(os.path.join(data, MARKER), encoding="utf-8") as handle:
        try:
            marker = json.load(handle)
        except ValueError as error:
            raise Refused(f"{data}/{MARKER}: not a memstate dataset marker ({error})") from error
    version = marker.get("layout_version") if isinstance(marker, dict) else None
    if not isinstance(version, int) or version > LAYOUT_VERSION:
        raise Refused(f"{data}: a dataset of layout version {version!r}; this runner reads up to {LAYOUT_VERSION}")
    check_exports(data)
    root = glob.escape(data)
    files = {table: [] for table in NODE_TABLES + RUN_TABLES}
    with_manifest = set()
    for path in sorted(glob.glob(os.path.join(root, NODES, "run=*", "node=*.json"))):
        try:
            with open(path, encoding="utf-8") as handle:
                named = json.load(handle)["files"]
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise Refused(f"{path}: not a node manifest ({error}); export that node again") from error
        missing = [table for table in NODE_TABLES if not isinstance(named.get(table), str)]
        if missing:
            raise Refused(f"{path}: the manifest names no file for {', '.join(missing)}; export that node again")
        for table in NODE_TABLES:
            files[table].append(os.path.join(data, *named[table].split("/")))
        run_folder = os.path.basename(os.path.dirname(path))
        with_manifest.add((run_folder, os.path.basename(path)[: -len(".json")]))
    for table in NODE_TABLES:
        for path in sorted(glob.glob(os.path.join(root, table, "run=*", "node=*", "part-0.parquet"))):
            node_dir = os.path.dirname(path)
            key = (os.path.basename(os.path.dirname(node_dir)), os.path.basename(node_dir))
            if key not in with_manifest:
                files[table].append(path)
    for table in RUN_TABLES:
        files[table] = sorted(glob.glob(os.path.join(root, table, "run=*", "part-0.parquet")))
    if not files["snapshots"]:
        raise Refused(f"{data}: the dataset holds no snapshots yet (its exports held no dumps)")
    for table, names in files.items():
        if not names:
            raise Refused(f"{data}: the dataset has no {table} files; export it again")
    return files


def check_exports(data):
    """Refuse a dataset that an export did not finish writing: a record in _memstate_exports/
    whose lock no live process holds."""
    for path in sorted(glob.glob(os.path.join(glob.escape(data), EXPORTS, "*.json"))):
        try:
            handle = open(path, "rb")
        except OSError:
            continue  # finished and removed meanwhile
        with handle:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError:
                continue  # an export at work: its nodes are read as before it
            try:
                record = json.loads(handle.read())
                parts = [(item["run"], item["node"]) for item in record["partitions"]]
                started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(record["started_unix"]))
                pid = record["pid"]
            except (ValueError, KeyError, TypeError):
                parts, started, pid = [], "?", "?"
        shown = ", ".join(f"run {run!r} node {node}" for run, node in parts[:5])
        more = f" and {len(parts) - 5} more" if len(parts) > 5 else ""
        raise Refused(
            f"{data}: an export did not finish (started {started}, pid {pid}; {path}): "
            f"{shown}{more} may hold an earlier export or none, so the dataset may mix two exports; "
            f"run that export again (or remove {path} to query the dataset as it is)"
        )


def hadoop_literal(path):
    """A path as a Hadoop glob pattern that matches only itself."""
    return re.sub(r"([\\\[\]{}*?])", r"\\\1", path)


def only_run(engine):
    _, rows = engine.rows("SELECT DISTINCT run FROM snapshots ORDER BY run")
    runs = [row[0] for row in rows]
    if len(runs) == 1:
        return runs[0]
    if not runs:
        raise Refused("the dataset holds no snapshots")
    shown = ", ".join(repr(run) for run in runs[:20])
    raise Refused(f"the dataset holds several runs ({shown}): give -p run=RUN")


def snapshot_parts(engine, value, memory=None):
    """RUN:NODE:SEQ, or `latest` by the one rule of the README ("Snapshot selectors"): the
    latest snapshot of the node of the memory given (when exactly one node has that memory), else
    of the dataset's only node; with several nodes and no memory to name one, refused."""
    if value == "latest":
        rows = []
        if memory is not None:
            _, rows = engine.rows(
                "SELECT DISTINCT run, node FROM memories WHERE memory = :memory", {"memory": memory}
            )
        if len(rows) != 1:
            _, rows = engine.rows("SELECT DISTINCT run, node FROM snapshots")
        if len(rows) != 1:
            raise Refused(
                f"snapshot_id=latest: the dataset holds {len(rows)} nodes and no memory given names one; give snapshot_id=RUN:NODE:SEQ (or memory_id)"
            )
        run, node = rows[0]
        _, rows = engine.rows(
            "SELECT max(seq) FROM snapshots WHERE run = :run AND node = :node",
            {"run": run, "node": int(node)},
        )
        return run, str(node), str(rows[0][0])
    parts = value.rsplit(":", 2)
    if len(parts) != 3 or not parts[0]:
        raise Refused(f"snapshot_id: {value!r} is not RUN:NODE:SEQ (or latest)")
    return parts[0], parts[1], parts[2]


def markers(query, values, spelling):
    """The query with each :name marker spelled as the engine spells a parameter, and the values
    it uses; a :name with no value is refused. Only names are rewritten: values stay out of the
    SQL text, bound by the engine."""
    used = {}

    def replace(match):
        name = match.group(1)
        if name not in values:
            raise Refused(f"the query needs :{name}, which no parameter gives")
        used[name] = values[name]
        return spelling + name

    # Skip quoted text and comments, so a ':' inside them is left alone.
    pieces = re.split(r"('(?:[^']|'')*'|--[^\n]*)", query)
    for index in range(0, len(pieces), 2):
        pieces[index] = re.sub(r"(?<![:\w]):([A-Za-z_]\w*)", replace, pieces[index])
    return "".join(pieces), used


def parameters(engine, params, given):
    """The query's parameters as typed values: text for a run and a memory, Python ints for the
    rest; a value not of its type is refused."""
    for key in given:
        if key not in params:
            raise Refused(f"unknown parameter {key!r} (this query takes: {', '.join(params) or 'none'})")
    values = {}
    for name, (kind, default) in params.items():
        value = given.get(name, default)
        if kind == "run":
            values[name] = value if value is not None else only_run(engine)
            continue
        if value is None:
            raise Refused(f"-p {name}=VALUE is needed")
        if kind == "snapshot":
            memory = next(
                (given.get(other, default) for other, (other_kind, default) in params.items() if other_kind == "memory"),
                None,
            )
            run, node, seq = snapshot_parts(engine, value, memory_text(memory) if memory is not None else None)
            values["snapshot_run"] = run
            values["snapshot_node"] = whole_number(node, "snapshot_id's node")
            values["snapshot_seq"] = whole_number(seq, "snapshot_id's seq")
        elif kind == "memory":
            values["memory"] = memory_text(value)
        elif kind == "limit":
            # LIMIT takes a 32-bit INT in Spark: at most 2^31 - 1 (as many rows).
            values[name] = min(max(whole_number(value, name), 0), 2**31 - 1)
        elif kind == "integer":
            values[name] = whole_number(value, name)
        else:
            raise Refused(f"{name}: the query declares an unknown kind {kind!r}")
    return values


def exact(value):
    """A value as `memstate report --format csv` writes it: integers in digits, reals as Rust
    prints an f64 (the shortest digits that read back, never an exponent), NULL empty."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, decimal.Decimal):
        if value == value.to_integral_value():
            return str(int(value))
        return exact(float(value))
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        text = format(decimal.Decimal(repr(value)), "f")
        if "." in text:
            text = text.rstrip("0").rstrip(".")
        if text in ("", "-"):
            text += "0"
        return text
    return str(value)


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="parquet-query",
        description="Run a memstate canned query over a Parquet dataset (memstate export) with DuckDB or Spark.",
    )
    parser.add_argument("--engine", choices=["duckdb", "spark"], default="duckdb")
    parser.add_argument("--data", help="the dataset's folder (memstate export --out DIR)")
    parser.add_argument("name", nargs="?", help="the query (queries/portable/NAME.sql)")
    parser.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--format", choices=["table", "csv"], default="table")
    parser.add_argument("--queries", default=QUERIES, help="the folder of portable queries")
    parser.add_argument("--list", action="store_true", help="list the queries and their parameters")
    args = parser.parse_args(argv)
    try:
        if args.list:
            for name in list_queries(args.queries):
                _, params = read_query(name, args.queries)
                print(f"{name}  {' '.join(f'-p {key}=' for key in params)}".rstrip())
            return 0
        if not args.name or not args.data:
            raise Refused("give --data DIR and a query NAME (or --list)")
        if not os.path.isfile(os.path.join(args.data, MARKER)):
            raise Refused(f"{args.data}: not a memstate dataset (no {MARKER}); write one with memstate export --format parquet --out DIR")
        query, params = read_query(args.name, args.queries)
        given = {}
        for item in args.param:
            key, sep, value = item.partition("=")
            if not sep:
                raise Refused(f"-p {item!r}: write key=value")
            given[key] = value
        names, rows = answer(args, query, params, given)
    except Refused as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as error:  # the engine's own errors: a dataset it cannot read, SQL it refuses
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        print(f"error: {args.engine}: {first}", file=sys.stderr)
        return 2
    try:
        write(args.format, names, rows, sys.stdout)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (| head): not an error; stop writing quietly.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def answer(args, query, params, given):
    """The query's columns and rows. An export switching a node while the query runs removes the
    files the views were made from: the dataset is then listed again and the query run again."""
    for attempt in range(3):
        files = dataset_files(args.data)
        try:
            engine = DuckDB(args.data, files) if args.engine == "duckdb" else Spark(args.data, files)
            values = parameters(engine, params, given)
            check_selectors(engine, values)
            return engine.rows(query, values)
        except Refused:
            raise
        except Exception:
            vanished = any(not os.path.exists(name) for names in files.values() for name in names)
            if not vanished or attempt == 2:
                raise


def check_selectors(engine, values):
    """Refuse a run, snapshot or memory the dataset does not hold, as `report` does, rather
    than answer with no rows."""
    if "run" in values:
        _, rows = engine.rows("SELECT count(*) FROM snapshots WHERE run = :run", values)
        if rows[0][0] == 0:
            _, runs = engine.rows("SELECT DISTINCT run FROM snapshots ORDER BY run")
            shown = ", ".join(repr(row[0]) for row in runs[:20])
            raise Refused(f"run: no such run in the dataset (it holds: {shown or 'none'})")
    if "snapshot_run" in values:
        where = "run = :snapshot_run AND node = :snapshot_node"
        _, rows = engine.rows(f"SELECT count(*) FROM snapshots WHERE {where} AND seq = :snapshot_seq", values)
        if rows[0][0] == 0:
            raise Refused("snapshot_id: no such snapshot in the dataset")
        if "memory" in values:
            _, rows = engine.rows(f"SELECT count(*) FROM memories WHERE {where} AND memory = :memory", values)
            if rows[0][0] == 0:
                raise Refused("memory_id: no such memory on the snapshot's node")


# What `memstate report` escapes in its table (src/units.rs, `visible`): control characters and
# the bidirectional marks that reorder a line on screen.
SHOWN_AS_ESCAPE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def visible(text):
    """Text from the data made safe for a terminal, as `memstate report` shows it: a control
    character is written as an escape (\\x1b, \\n, \\u{202e}), so a value cannot move the cursor,
    clear the screen or retitle the window. csv is machine-readable and written as it is."""

    def escape(match):
        c = match.group(0)
        named = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}
        if c in named:
            return named[c]
        return "\\x%02x" % ord(c) if ord(c) < 0x100 else "\\u{%x}" % ord(c)

    return SHOWN_AS_ESCAPE.sub(escape, text)


def write(form, names, rows, out):
    if form == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(names)
        for row in rows:
            writer.writerow([exact(value) for value in row])
        return
    cells = [[visible(name) for name in names]] + [[visible(exact(value)) for value in row] for row in rows]
    widths = [max(len(row[column]) for row in cells) for column in range(len(names))]
    for number, row in enumerate(cells):
        out.write("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() + "\n")
        if number == 0:
            out.write("  ".join("-" * width for width in widths) + "\n")
    if not rows:
        out.write("(no rows)\n")


if __name__ == "__main__":
    sys.exit(main())
