"""Load a memstate database into pandas and plot fragmentation over time.

    python3 examples/pandas_trend.py memstate-demo/memstate.db fragmentation.png

Reads two public views with the sqlite3 module of the standard library: `memory_trend` (one row
per memory per snapshot) and one snapshot's `allocations` (the last out-of-memory snapshot, else
the latest). Prints a short summary, as tab-separated lines, and writes the chart as PNG.
Needs pandas and matplotlib (pip install pandas matplotlib).
"""

import sqlite3
import sys

import matplotlib

matplotlib.use("Agg")  # no display needed
import matplotlib.pyplot as plt
import pandas as pd


def main(db_path: str, png_path: str) -> None:
    # Read-only: the file is not changed, and a database being imported into can be read.
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    trend = pd.read_sql_query(
        "SELECT run, node, series, kind, seq, time_s, time_unix, free_bytes, largest_hole, fragmentation, reason"
        " FROM memory_trend ORDER BY run, node, series, seq",
        conn,
    )
    snapshot = pd.read_sql_query(
        "SELECT snapshot_id, run, node, seq FROM snapshots"
        " ORDER BY reason = 'oom' DESC, time_s DESC, snapshot_id DESC LIMIT 1",
        conn,
    )
    snapshot_id = int(snapshot.snapshot_id[0])
    allocations = pd.read_sql_query(
        "SELECT uid, kind, state, offset, size, provenance FROM allocations WHERE snapshot_id = ?",
        conn,
        params=(snapshot_id,),
    )
    conn.close()

    # One line per memory of the first run: fragmentation against time (wall time when the dumps
    # have it), the out-of-memory snapshots marked.
    run = trend.run.iloc[0]
    shown = trend[trend.run == run].copy()
    wall = shown.time_unix.notna().all()
    shown["when"] = pd.to_datetime(shown.time_unix, unit="s") if wall else shown.time_s
    fig, ax = plt.subplots(figsize=(11, 5.5))
    for series, rows in shown.groupby("series"):
        ax.plot(rows["when"], rows.fragmentation, label=series, linewidth=2)
    for when in shown[shown.reason == "oom"]["when"].unique():
        ax.axvline(when, color="#b01c1c", linewidth=2)
    ax.set_title(f"Fragmentation (1 - largest hole / free) of run {run}", fontsize=15)
    ax.set_xlabel("wall time" if wall else "seconds since the run started", fontsize=12)
    ax.set_ylabel("fragmentation", fontsize=12)
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize=9, loc="upper left")
    fig.tight_layout()
    fig.savefig(png_path, dpi=100)

    by_kind = allocations.groupby("kind")["size"].sum().sort_values(ascending=False)
    print(f"trend_rows\t{len(trend)}")
    for series, value in shown.groupby("series").fragmentation.max().items():
        print(f"max_fragmentation\t{series}\t{value:.6f}")
    print(f"snapshot\t{snapshot_id}\t{snapshot.run[0]}\t{int(snapshot.node[0])}\t{int(snapshot.seq[0])}")
    print(f"allocations\t{len(allocations)}\t{int(allocations['size'].sum())}")
    for kind, size in by_kind.items():
        print(f"bytes_by_kind\t{kind}\t{int(size)}")
    print(f"chart\t{png_path}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: pandas_trend.py DATABASE OUT.png")
    main(sys.argv[1], sys.argv[2])
