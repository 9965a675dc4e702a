"""memstate's Datasette plugin, written by `memstate datasette-metadata --plugins-dir DIR`.

Serve with: datasette memstate.db -m metadata.json --plugins-dir DIR

- Sizes show in binary units as memstate's command line prints them (270 MiB, not 283.1 MB), the
  exact number of bytes in the cell's tooltip; offsets show in hex (0x2d49400). The stored values,
  sorting, filters, JSON and CSV are untouched: this changes only what the HTML tables show.
- The SQL box of the database page opens on a public view, not on a private storage table.

The column names come from memstate's own documentation (docs/SCHEMA.md and the canned
queries), filled in when the file is written.
"""

import html
import json

from datasette import hookimpl

DATABASE = __DATABASE__
BYTE_COLUMNS = set(__BYTE_COLUMNS__)
OFFSET_COLUMNS = set(__OFFSET_COLUMNS__)
FIRST_SQL = __FIRST_SQL__
UNITS = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]


def human_size(count):
    """As memstate prints a size: below 1 KiB in bytes, else the largest binary unit that keeps
    it at or above 1, with one decimal below 100 unless it is whole."""
    if abs(count) < 1024:
        return f"{count} B"
    value = abs(count) / 1024.0
    unit = 0
    while value >= 1024.0 and unit + 1 < len(UNITS):
        value /= 1024.0
        unit += 1
    sign = "-" if count < 0 else ""
    tenths = round((value % 1) * 10)
    if value >= 100.0 or tenths in (0, 10):
        shown = f"{value:.0f}"
    else:
        shown = f"{value:.1f}"
    return f"{sign}{shown} {UNITS[unit]}"


def hex_offset(offset):
    return f"-0x{-offset:x}" if offset < 0 else f"0x{offset:x}"


@hookimpl
def render_cell(value, column, database):
    if database != DATABASE or isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if column in BYTE_COLUMNS:
        from markupsafe import Markup

        exact = f"{value:,} bytes" if isinstance(value, int) else f"{value} bytes"
        shown = human_size(int(value))
        return Markup(
            f'<span title="{html.escape(exact)}">{html.escape(shown).replace(" ", "&nbsp;")}</span>'
        )
    if column in OFFSET_COLUMNS and isinstance(value, int):
        return hex_offset(value)
    return None


@hookimpl
def extra_body_script(template, database):
    # Datasette fills the SQL box with the first table, and memstate's tables are all private
    # storage: put a public view there instead (before the editor is made from the box, on load).
    if template != "database.html" or database != DATABASE:
        return None
    return (
        "(function () {"
        ' var box = document.querySelector("textarea#sql-editor");'
        ' if (box && /^select \\* from /i.test(box.value)) { box.value = %s; }'
        "})();" % json.dumps(FIRST_SQL)
    )
