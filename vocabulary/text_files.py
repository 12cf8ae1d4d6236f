"""Reading the text files a user hands in (a campaign spec, a rubric), the same way everywhere.

Editors save UTF-8 with a byte-order mark (Notepad, Excel's "CSV UTF-8") and with CRLF line ends (Windows); neither
is an error here: the mark is dropped and every line end reads as ``\\n``, as the pool and history CSVs are already
read. A file saved as UTF-16 or UTF-32 (it starts with that encoding's byte-order mark) gets one line saying so and
"save it as UTF-8", instead of a decoding or syntax error that sends the user looking for a fault that is not there.

Example:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "spec.toml"
    >>> _ = path.write_bytes(b"\\xef\\xbb\\xbf[campaign]\\r\\nname = 'demo'\\r\\n")
    >>> read_text_file(path)
    "[campaign]\\nname = 'demo'\\n"
    >>> _ = path.write_bytes("[campaign]\\n".encode("utf-16"))
    >>> read_text_file(path)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    vocabulary.text_files.TextFileError: ... is UTF-16 text (it starts with a UTF-16 byte-order mark); save it as UTF-8
"""

from __future__ import annotations

import os

from vocabulary.domain import SetupError

__all__ = ["MAX_TEXT_BYTES", "UTF8_BOM", "TextFileError", "normalised_text", "read_text_file", "wide_encoding_problem"]

MAX_TEXT_BYTES = 64 * 2**20
"""The largest text file read whole (64 MiB): a spec with an inline space of 10^5 SMILES is about 5 MB."""

UTF8_BOM = b"\xef\xbb\xbf"
_WIDE_BOMS = ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"), (b"\xff\xfe", "UTF-16"),
              (b"\xfe\xff", "UTF-16"))  # UTF-32 LE starts with UTF-16 LE's mark, so it is tried first


class TextFileError(SetupError):
    """A user's text file cannot be read as UTF-8 text. ``problem`` says what is wrong and the fix without naming
    the file, for messages that name it their own way."""

    def __init__(self, path: str | os.PathLike[str], problem: str):
        self.path, self.problem = str(path), problem
        super().__init__(f"{self.path} {problem}")


def wide_encoding_problem(head: bytes) -> str | None:
    """What is wrong with a file whose first bytes are ``head`` when it is UTF-16 or UTF-32 text, else None.

    Example:
        >>> wide_encoding_problem(b"\\xff\\xfes\\x00"), wide_encoding_problem(b"smiles")
        ('is UTF-16 text (it starts with a UTF-16 byte-order mark); save it as UTF-8', None)
    """
    for mark, encoding in _WIDE_BOMS:
        if head.startswith(mark):
            return f"is {encoding} text (it starts with a {encoding} byte-order mark); save it as UTF-8"
    return None


def normalised_text(text: str) -> str:
    """Text as the readers take it: without a leading byte-order mark, every CRLF or lone CR line end as ``\\n``.

    Example:
        >>> normalised_text("\\ufeffa = 1\\r\\nb = 2\\rc = 3\\n")
        'a = 1\\nb = 2\\nc = 3\\n'
    """
    return text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")


def read_text_file(path: str | os.PathLike[str], *, max_bytes: int = MAX_TEXT_BYTES) -> str:
    """The UTF-8 text of a file a user hands in, normalised (``normalised_text``).

    Raises:
        TextFileError: the file cannot be read, is larger than ``max_bytes``, is UTF-16 or UTF-32 text, or is not
            UTF-8; the message names the file, what is wrong and the fix.
    """
    try:
        with open(path, "rb") as handle:
            data = handle.read(max_bytes + 1)  # never more, whatever the file holds
    except OSError as exc:
        raise TextFileError(path, f"cannot be read ({exc.strerror or exc}); check the path and its permissions") from None
    if len(data) > max_bytes:
        raise TextFileError(path, f"is larger than {max_bytes:,} bytes, the most a text file here may hold; is it the "
                                  "right file?")
    problem = wide_encoding_problem(data[:4])
    if problem:
        raise TextFileError(path, problem)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise TextFileError(path, f"is not UTF-8 text (byte {exc.start}: {exc.reason}); save it as UTF-8") from None
    return normalised_text(text)
