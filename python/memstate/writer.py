"""Write memstate dumps (format v1, docs/FORMAT.md) from Python, with the standard library only.

A dump is streamed to a temporary file as it is described (memory does not grow with the number
of allocations: only the distinct strings are kept, interned into the dump's ``strings`` table)
and renamed into place by ``finish()``, so a reader never sees half a dump. Sizes, offsets and ids
are integers.

    from memstate.writer import DumpWriter

    with DumpWriter("/path/to/dumps", run="my-run", node=0, seq=7,
                    time_ns=1_500_000_000, reason="oom") as dump:
        dump.memory(0x1E00000000000003, "GPU_FB_MEM", 1 << 30)
        dump.allocation(42, "instance", "valid", offset=0, size=4096, provenance="train.py:12")
        dump.failed_request(1 << 28)

Call order: ``memory()``, then its ``allocation()``s, then its ``failed_request()``s; then the
next ``memory()``. Leaving the ``with`` block finishes the dump (or, on an exception, removes
it). The file is DIR/RUN-nNODE-sSEQ.json (characters of the run other than letters, digits, '-',
'_' and '.' become '_').
"""

import json
import os
import re

__all__ = ["DumpWriter"]


class DumpWriter:
    def __init__(self, directory, run, node, seq, time_ns, reason="periodic"):
        name = "%s-n%d-s%d.json" % (re.sub(r"[^A-Za-z0-9._-]", "_", str(run)), node, seq)
        self.path = os.path.join(directory, name)
        self._temporary = os.path.join(directory, "." + name + ".tmp")
        self._strings = []
        self._index = {}
        self._part = "top"
        self._any_memory = False
        self._first = True
        self._file = open(self._temporary, "w", encoding="utf-8", newline="\n")
        self._put('{"format":"memstate-dump","version":1,"run":{"id":%s,"node":%d},'
                  '"snapshot":{"seq":%d,"time_ns":%d,"reason":%d},"memories":['
                  % (json.dumps(str(run)), _integer(node), _integer(seq), _integer(time_ns),
                     self._intern(reason)))

    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback):
        if kind is None:
            self.finish()
        else:
            self.abandon()
        return False

    def _put(self, text):
        self._file.write(text)

    def _intern(self, text):
        text = str(text)
        index = self._index.get(text)
        if index is None:
            index = len(self._strings)
            self._strings.append(text)
            self._index[text] = index
        return index

    def _close_memory(self):
        if self._part in ("allocations", "failed"):
            self._put("]}")
        self._part = "top"

    def memory(self, memory_id, kind, capacity):
        """Start a memory: a Realm memory id, its kind (GPU_FB_MEM...), its capacity in bytes."""
        self._close_memory()
        self._put("%s{\"id\":%d,\"kind\":%d,\"capacity\":%d,\"allocations\":["
                  % ("," if self._any_memory else "", _integer(memory_id), self._intern(kind),
                     _integer(capacity)))
        self._any_memory = True
        self._part = "allocations"
        self._first = True

    def allocation(self, uid, kind, state, offset, size, provenance=None):
        """One allocation of the current memory; state is valid, collectable, pending_free or
        pending_alloc."""
        if self._part != "allocations":
            raise ValueError("allocation() outside a memory, or after its failed_request()s")
        text = "%s{\"uid\":%d,\"kind\":%d,\"state\":%d,\"offset\":%d,\"size\":%d" % (
            "" if self._first else ",", _integer(uid), self._intern(kind), self._intern(state),
            _integer(offset), _integer(size))
        if provenance:
            text += ",\"provenance\":%d" % self._intern(provenance)
        self._put(text + "}")
        self._first = False

    def failed_request(self, size, alignment=None):
        """A request the current memory could not satisfy (after its allocations)."""
        if self._part == "allocations":
            self._put("],\"failed_requests\":[")
            self._part = "failed"
            self._first = True
        if self._part != "failed":
            raise ValueError("failed_request() outside a memory")
        text = "%s{\"size\":%d" % ("" if self._first else ",", _integer(size))
        if alignment:
            text += ",\"alignment\":%d" % _integer(alignment)
        self._put(text + "}")
        self._first = False

    def finish(self):
        """Close the dump and move it into place."""
        if self._file is None:
            raise ValueError("the dump is already finished")
        self._close_memory()
        self._put("],\"strings\":%s}\n" % json.dumps(self._strings, ensure_ascii=False))
        self._file.flush()
        self._file.close()
        self._file = None
        os.replace(self._temporary, self.path)
        return self.path

    def abandon(self):
        """Drop a dump that will not be finished (its temporary file is removed)."""
        if self._file is not None:
            self._file.close()
            self._file = None
            try:
                os.remove(self._temporary)
            except FileNotFoundError:
                pass


def _integer(value):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError("memstate dumps hold integers, not %r" % (value,))
    return value
