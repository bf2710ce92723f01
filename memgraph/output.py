"""Writing a report where the user said: all of it or nothing, and never replacing what is not a file.

* ``-`` (or no ``--output``) is standard output, for every command.
* A regular file (new or existing, also through a symbolic link) is written to a temporary file in
  the same folder and renamed over it atomically, so a failure leaves the old file as it was; a
  symbolic link stays a link (the file it points to is replaced).
* Anything else that exists and is not a folder (a FIFO, a character device such as /dev/null)
  is written through, in place: renaming over it would replace the device node itself.
* A folder, an empty name, or a missing parent folder is refused before any work is done.
"""

from __future__ import annotations

import os
import stat
import sys
import tempfile
from pathlib import Path

from memgraph.errors import MemgraphError

STDOUT = "-"


def check_output_path(path: str | None) -> None:
    """Refuse a target that cannot be written, before the analysis runs."""
    if path is None or path == STDOUT:
        return
    if path == "":
        raise MemgraphError("--output is empty: give a file name, or '-' for standard output")
    target = Path(path)
    if target.is_dir():
        raise MemgraphError(f"cannot write {path!r}: it is a folder; give a file name inside it")
    parent = target.resolve().parent
    if not parent.is_dir():
        raise MemgraphError(f"cannot write {path!r}: folder {str(target.parent)!r} does not exist")
    if not os.access(parent if not target.exists() else target, os.W_OK):
        raise MemgraphError(f"cannot write {path!r}: permission denied")


def write_output(text: str | bytes, path: str | None) -> None:
    """Write all of ``text`` (or binary ``bytes``) to ``path`` (see the module docstring), or to
    standard output (text only)."""
    if path is None or path == STDOUT:
        if isinstance(text, bytes):
            raise MemgraphError("this format is binary (a pickle): give --output FILE, not standard output")
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    check_output_path(path)
    target = Path(path).resolve()  # a symbolic link: the file it points to
    mode = "wb" if isinstance(text, bytes) else "w"
    if target.exists() and not stat.S_ISREG(target.stat().st_mode):
        with open(target, mode) as f:  # FIFO, character device: write through, never replace the node
            f.write(text)
        return
    _replace_atomically(target, text)


def is_file_target(path: str | None) -> bool:
    """Whether ``path`` names a file (not standard output): a confirmation line is worth printing."""
    return path is not None and path != STDOUT


def _replace_atomically(target: Path, text: str | bytes) -> None:
    # A short temporary name: the target's own name may already be near the 255-byte limit.
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".memgraph-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb" if isinstance(text, bytes) else "w") as f:
            f.write(text)
        mode = target.stat().st_mode & 0o777 if target.exists() else 0o666 & ~_umask()
        os.chmod(tmp, mode)  # mkstemp makes 0600; keep the old file's mode, or give open()'s usual one
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
