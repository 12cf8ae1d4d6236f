"""Write what a command produces without replacing what is not ours.

Every file a command writes at a path the user chose (``ledger export --out``, ``closedloop export --out``,
``report --out``) goes through ``output_file``: it is written to a temporary file in the same folder and published
only when complete, so a crash leaves no half-written file and a reader never sees one. What is at the path decides:

- nothing: the file is published with a hard link, which fails rather than overwrite whatever appeared there since
  the check (a rename would replace it);
- a regular file: refused with one line that suggests ``--force`` or another path; with ``force`` it is replaced by
  a rename (atomic: the old file or the new, never a mix);
- a symbolic link, FIFO, socket, device or directory: always refused. Writing there would replace something that
  is not an output of ours (as root, ``--out /dev/full`` replaced the device) or write through it to somewhere else.

An output folder (``output_dir``) must be absent (it is created) or a real folder, not a link to one or a file. A
folder written as one output (a saved dataset, ``publish_tree``) replaces an earlier one only with ``force`` and
only when that one holds the file the output always writes: a folder that is not ours is never removed.

Example:
    >>> import tempfile, pathlib
    >>> target = pathlib.Path(tempfile.mkdtemp()) / "out.txt"
    >>> with output_file(target) as tmp:
    ...     _ = tmp.write_text("one")
    >>> with output_file(target) as tmp:  # doctest: +ELLIPSIS
    ...     _ = tmp.write_text("two")
    Traceback (most recent call last):
    ...
    orchestrator.ledger.outputs.OutputPathError: .../out.txt already exists; pass --force to overwrite it, or give another path
    >>> with output_file(target, force=True) as tmp:
    ...     _ = tmp.write_text("two")
    >>> target.read_text()
    'two'
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from vocabulary.domain import SetupError

__all__ = ["OutputPathError", "check_output_path", "check_output_tree", "output_dir", "output_file", "publish_file",
           "publish_tree"]


class OutputPathError(SetupError):
    """An output path holds something a command must not replace or write through; nothing was written there."""


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "not a regular file"


def _mode(target: Path) -> int | None:
    """What is at ``target`` (its ``lstat`` mode; None when nothing is), or ``OutputPathError`` when that cannot
    be known (a file where a folder of the path should be, no permission)."""
    try:
        return os.lstat(target).st_mode
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        raise OutputPathError(f"{target} cannot be an output: a part of its path is a file, not a directory; give "
                              "another path") from None
    except OSError as exc:
        raise OutputPathError(f"{target} cannot be an output ({exc.strerror}); give another path") from None


def check_output_path(path: str | Path, *, force: bool = False) -> None:
    """Raise ``OutputPathError`` unless a file may be written at ``path``: nothing there, or (with ``force``) a
    regular file; never a link, FIFO, socket, device or directory. The folder it goes in must exist."""
    target = Path(path)
    mode = _mode(target)
    if mode is None:
        if not target.parent.is_dir():
            raise OutputPathError(f"directory {target.parent} does not exist; create it or pick another output "
                                  "path")
        return
    if stat.S_ISREG(mode):
        if not force:
            raise OutputPathError(f"{target} already exists; pass --force to overwrite it, or give another path")
        return
    raise OutputPathError(f"{target} is {_kind(mode)}, not a regular file; it was left as it is: give the path of a "
                          "file to write")


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextmanager
def output_file(path: str | Path, *, force: bool = False) -> Iterator[Path]:
    """A temporary path beside ``path`` to write the output to; published at ``path`` when the block ends without
    an error (discarded otherwise). ``path`` is checked before (``check_output_path``) and again as it is published.

    Raises:
        OutputPathError: what is at ``path`` may not be replaced (a regular file without ``force``), or never may.
    """
    target = Path(path)
    check_output_path(target, force=force)
    try:
        fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise OutputPathError(f"cannot write in {target.parent} ({exc.strerror}); pick another output path") from None
    os.close(fd)
    tmp = Path(name)
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # as an ordinary new file, not mkstemp's 0600
        yield tmp
        publish_file(tmp, target, force=force)
    finally:
        tmp.unlink(missing_ok=True)


def publish_file(tmp: Path, target: Path, *, force: bool = False) -> None:
    """Move the finished file ``tmp`` (in ``target``'s folder) to ``target``, as ``output_file`` does."""
    check_output_path(target, force=force)
    if force:
        os.replace(tmp, target)  # replaces the entry itself, never what a link there points to
        return
    try:
        os.link(tmp, target)  # fails if anything appeared at the path since the check
    except FileExistsError:
        check_output_path(target, force=False)  # names what is there now
        raise
    except OSError:  # a filesystem without hard links
        os.replace(tmp, target)


def output_dir(path: str | Path) -> Path:
    """``path`` as an output folder: created (with its parents) when absent, accepted when it is a real folder;
    ``OutputPathError`` when it is a file, a link (to a folder or not) or anything else."""
    target = Path(path)
    mode = _mode(target)
    if mode is None:
        try:
            target.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OutputPathError(f"cannot create the output directory {target} ({exc.strerror}); give another "
                                  "path") from None
        return target
    if stat.S_ISDIR(mode):
        return target
    kind = "a regular file" if stat.S_ISREG(mode) else _kind(mode)
    raise OutputPathError(f"{target} is {kind}, not a directory; it was left as it is: give a directory for the "
                          "output (absent ones are created)")


def publish_tree(tmp: Path, target: Path, *, force: bool = False, marker: str) -> None:
    """Move the folder ``tmp`` (a folder output, such as a saved dataset, written whole) to ``target``. An existing
    folder there is replaced only with ``force`` and only when it holds ``marker`` (a file that output always
    writes), so a folder that is not ours is never removed; anything else there is refused."""
    exists = check_output_tree(target, force=force, marker=marker)
    if not exists:
        os.rename(tmp, target)
        return
    aside = Path(tempfile.mkdtemp(prefix=f".{target.name}.old.", dir=target.parent))
    os.rename(target, aside / target.name)
    os.rename(tmp, target)
    shutil.rmtree(aside, ignore_errors=True)


def check_output_tree(target: Path, *, force: bool = False, marker: str) -> bool:
    """Whether a folder output exists at ``target`` and may be replaced (``publish_tree``); ``OutputPathError``
    when it may not. False when nothing is there."""
    mode = _mode(target)
    if mode is None:
        return False
    if not stat.S_ISDIR(mode):
        kind = "a regular file" if stat.S_ISREG(mode) else _kind(mode)
        raise OutputPathError(f"{target} is {kind}, not a directory; it was left as it is: give another path")
    if not force:
        raise OutputPathError(f"{target} already exists; pass --force to overwrite it, or give another path")
    if not (target / marker).is_file():
        raise OutputPathError(f"{target} is a directory that closedloop did not write (it has no {marker}); it was "
                              "left as it is: give another path")
    return True
