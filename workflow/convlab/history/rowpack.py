"""A kept row's JSON, packed small (standard library only).

A row is about 2 KB of JSON, and a page of SQLite holds one such row: a year of history took
4.4 KB a row on disk. Rows of one device differ in a few values, so each is deflated against a
dictionary: the first row kept with the same columns. The dictionary is kept in the database
beside the rows that name it, so a packed row is read back byte for byte by whoever opens the file,
whatever this module's version.
"""

from __future__ import annotations

import hashlib
import json
import zlib

# deflate's level: 6 packs within a byte of 9
LEVEL = 6
# Raw deflate (no zlib header or checksum: SQLite's pages carry their own). An 8 KB window holds a
# row and its dictionary and packs them as small as the largest window at a quarter of its time;
# unpacking with the largest window reads a row packed with any.
PACK_WINDOW, UNPACK_WINDOW = -13, -15


def columns_key(row_json: str) -> str:
    """What rows packed with one dictionary share: a hash of their columns, in order ("" for a
    row whose JSON is not an object: it is packed all the same, against whatever dictionary)."""
    try:
        row = json.loads(row_json)
    except ValueError:
        return ""
    names = list(row) if isinstance(row, dict) else []
    return hashlib.sha256(json.dumps(names).encode()).hexdigest()[:16] if names else ""


def pack(row_json: str, dictionary: bytes) -> bytes:
    """The row's JSON deflated against ``dictionary``."""
    packer = zlib.compressobj(LEVEL, zlib.DEFLATED, PACK_WINDOW, 8, zlib.Z_DEFAULT_STRATEGY, dictionary)
    return packer.compress(row_json.encode()) + packer.flush()


def unpack(packed: bytes, dictionary: bytes) -> str:
    """The row's JSON, as it was packed. Raises ValueError where ``packed`` is not a row packed
    against ``dictionary``."""
    unpacker = zlib.decompressobj(UNPACK_WINDOW, zdict=dictionary)
    try:
        text = unpacker.decompress(packed) + unpacker.flush()
    except zlib.error as error:
        raise ValueError(f"not a packed row: {error}") from None
    if not unpacker.eof:
        raise ValueError("a packed row cut short")
    return text.decode()
