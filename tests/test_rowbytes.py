"""A run's checks read each cell row once while it starts, and split its columns once."""

from __future__ import annotations

import os

import pytest

from convlab.snakefile import rowbytes
from convlab.snakefile.freshness import row_fields
from convlab.snakefile.rowbytes import ROW_BYTES


def test_a_rows_columns_are_split_once_while_reading_once_and_again_when_the_row_changes(tmp_path, monkeypatch):
    row = tmp_path / "row.csv"
    row.write_text("spec_hash,code_version\naaaa,v1\n")
    splits = []
    split = rowbytes._columns
    monkeypatch.setattr(rowbytes, "_columns", lambda data: splits.append(data) or split(data))
    with ROW_BYTES.reading_once():
        assert row_fields(row, "spec_hash") == ("aaaa",)
        assert row_fields(row, "code_version", "missing") == ("v1", None)
        assert len(splits) == 1
        row.write_text("spec_hash,code_version\nbbbbbb,v2\n")  # written again: another size
        assert row_fields(row, "spec_hash", "code_version") == ("bbbbbb", "v2")
        assert len(splits) == 2
        os.remove(row)
        assert row_fields(row, "spec_hash") == (None,)
    # outside, every ask reads the file
    row.write_text("spec_hash\ncccc\n")
    assert row_fields(row, "spec_hash") == ("cccc",)
    row.write_text("spec_hash\ndddd\n")
    assert row_fields(row, "spec_hash") == ("dddd",)


@pytest.mark.parametrize("content", [b"", b"spec_hash\n", b"spec_hash\na\nb\n", b"\xff\xfe not text"])
def test_a_file_that_is_not_a_header_and_one_row_has_no_columns(tmp_path, content):
    row = tmp_path / "row.csv"
    row.write_bytes(content)
    with ROW_BYTES.reading_once():
        assert ROW_BYTES.columns(row) is None and row_fields(row, "spec_hash") == (None,)
    assert ROW_BYTES.columns(row) is None
