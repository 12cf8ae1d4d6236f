"""Reading a user's text file (issue 46): a UTF-8 byte-order mark and any line ends are no error; UTF-16 and UTF-32
files, text that is not UTF-8 and an unreadable file get one line naming the file and the fix."""

from __future__ import annotations

import os

import pytest

from vocabulary.domain import SetupError
from vocabulary.text_files import (
    TextFileError,
    normalised_text,
    read_text_file,
    wide_encoding_problem,
)

TEXT = "[campaign]\nname = \"Pd/C screen — ΔG\"\n\n[lab]\noracle_column = \"y\"\n"


@pytest.mark.parametrize("prefix", [b"", b"\xef\xbb\xbf"])
@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_a_byte_order_mark_and_any_line_ends_read_as_the_plain_text(tmp_path, prefix, newline):
    path = tmp_path / "file.toml"
    path.write_bytes(prefix + TEXT.replace("\n", newline).encode("utf-8"))
    assert read_text_file(path) == TEXT


@pytest.mark.parametrize("encoding,name", [("utf-16", "UTF-16"), ("utf-16-le", "UTF-16"), ("utf-16-be", "UTF-16"),
                                           ("utf-32", "UTF-32"), ("utf-32-le", "UTF-32"), ("utf-32-be", "UTF-32")])
def test_a_utf16_or_utf32_file_is_refused_with_save_it_as_utf8(tmp_path, encoding, name):
    path = tmp_path / "file.toml"
    mark = "" if encoding in ("utf-16", "utf-32") else "\ufeff"  # the plain codecs write their own mark
    path.write_bytes((mark + TEXT).encode(encoding))
    with pytest.raises(TextFileError) as err:
        read_text_file(path)
    assert isinstance(err.value, SetupError)
    assert err.value.problem == f"is {name} text (it starts with a {name} byte-order mark); save it as UTF-8"
    assert str(err.value) == f"{path} {err.value.problem}" and "\n" not in str(err.value)


def test_text_that_is_not_utf8_names_the_byte(tmp_path):
    path = tmp_path / "file.toml"
    path.write_bytes("[campaign]\nname = \"café\"\n".encode("latin-1"))
    with pytest.raises(TextFileError, match=r"is not UTF-8 text \(byte \d+: invalid .*\); save it as UTF-8"):
        read_text_file(path)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file whatever its permissions")
def test_an_unreadable_file_is_one_line_not_a_traceback(tmp_path):
    path = tmp_path / "file.toml"
    path.write_text(TEXT)
    path.chmod(0)
    with pytest.raises(TextFileError, match="cannot be read .*check the path and its permissions"):
        read_text_file(path)


def test_a_directory_is_one_line_not_a_traceback(tmp_path):
    with pytest.raises(TextFileError, match="cannot be read"):
        read_text_file(tmp_path)


def test_only_a_leading_mark_is_dropped():
    assert normalised_text("\ufeffa\ufeff\r\n") == "a\ufeff\n"
    assert wide_encoding_problem(b"\xef\xbb\xbfab") is None and wide_encoding_problem(b"") is None


def test_a_file_over_the_size_limit_is_refused_having_read_no_more_than_the_limit(tmp_path):
    path = tmp_path / "file.toml"
    path.write_text("x" * 101)
    assert read_text_file(path, max_bytes=101) == "x" * 101
    with pytest.raises(TextFileError, match="is larger than 100 bytes, the most a text file here may hold"):
        read_text_file(path, max_bytes=100)
