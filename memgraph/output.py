"""Writing a report where the user said: all of it or nothing, and never replacing what is not a file.

* ``-`` (or no ``--output``) is standard output, for every command.
* A regular file (new or existing, also through a symbolic link) is written to a temporary file in
  the same folder and renamed over it atomically, so a failure leaves the old file as it was; a
  symbolic link stays a link (the file it points to is replaced).
* Anything else that exists and is not a folder (a FIFO, a character device such as /dev/null)
  is written through, in place: renaming over it would replace the device node itself.
* A folder, an empty name, a missing parent folder, or a folder where no file can be made (``/proc``,
  ``/sys``, a read-only file system) is refused before any work is done: a temporary file is made there
  and removed again.
* Whatever the operating system refuses while writing (a full disk, ``ENOSPC``; a file-size limit,
  ``EFBIG`` under ``ulimit -f``; a name longer than the file system allows, ``ENAMETOOLONG``) is one line
  naming the path and the reason, and the temporary file is removed: nothing half-written remains.
"""

from __future__ import annotations

import contextlib
import io
import os
import stat
import sys
import tempfile
from pathlib import Path

from memgraph.errors import MemgraphError

STDOUT = "-"
_TEMP_PREFIX, _TEMP_SUFFIX = ".memgraph-", ".tmp"


@contextlib.contextmanager
def _os_refusals(path: str):
    """An OSError while checking or writing ``path``: one line naming the path and the system's reason."""
    try:
        yield
    except BrokenPipeError:  # the reader went away (memgraph ... | head): the CLI ends quietly
        raise
    except OSError as e:
        reason = e.strerror or type(e).__name__
        raise MemgraphError(f"cannot write {_shown(path)}: {reason} (errno {e.errno}): "
                            "give --output a path on a writable file system with room for the report") from None


def _shown(path: str) -> str:
    return repr(path) if len(path) <= 120 else repr(path[:60] + "..." + path[-20:]) + f" ({len(path):,} characters)"


def check_output_path(path: str | None) -> None:
    """Refuse a target that cannot be written, before the analysis runs."""
    if path is None or path == STDOUT:
        return
    if path == "":
        raise MemgraphError("--output is empty: give a file name, or '-' for standard output")
    with _os_refusals(path):
        _check_target(path)


def _check_target(path: str) -> None:
    target = Path(path)
    if target.is_dir() or path.endswith(("/", os.sep)):
        raise MemgraphError(f"cannot write {_shown(path)}: it is a folder; give a file name inside it")
    parent = target.resolve().parent
    if not parent.is_dir():
        raise MemgraphError(f"cannot write {_shown(path)}: folder {str(target.parent)!r} does not exist")
    if target.exists() and not stat.S_ISREG(target.resolve().stat().st_mode):
        if not os.access(target, os.W_OK):
            raise MemgraphError(f"cannot write {_shown(path)}: permission denied")
        return  # a FIFO or a device: written through, nothing is made beside it
    if not os.access(parent if not target.exists() else target, os.W_OK):
        raise MemgraphError(f"cannot write {_shown(path)}: permission denied")
    # what os.access cannot know (/proc, /sys, a read-only mount): make the temporary file the write will make
    fd, tmp = tempfile.mkstemp(dir=parent, prefix=_TEMP_PREFIX, suffix=_TEMP_SUFFIX)
    os.close(fd)
    os.unlink(tmp)


def write_output(text: str | bytes, path: str | None) -> None:
    """Write all of ``text`` (or binary ``bytes``) to ``path`` (see the module docstring), or to
    standard output (text only)."""
    if path is None or path == STDOUT:
        if isinstance(text, bytes):
            raise MemgraphError("this format is binary (a pickle): give --output FILE, not standard output")
        with _os_refusals("standard output"):
            stream = standard_stream("stdout")
            stream.write(text)
            stream.flush()
        return
    check_output_path(path)
    with _os_refusals(path):
        target = Path(path).resolve()  # a symbolic link: the file it points to
        mode = "wb" if isinstance(text, bytes) else "w"
        if target.exists() and not stat.S_ISREG(target.stat().st_mode):
            with open(target, mode) as f:  # FIFO, character device: write through, never replace the node
                f.write(text)
            return
        _replace_atomically(target, text)


def standard_stream(name: str):
    """``sys.stdout`` or ``sys.stderr``, or, when the model's code closed it (a factory that calls
    ``sys.stdout.close()``), a new text stream on the same file descriptor, left open when it goes."""
    stream = getattr(sys, name)
    if stream is not None and not getattr(stream, "closed", False):
        return stream
    fd = 1 if name == "stdout" else 2
    fresh = io.TextIOWrapper(io.FileIO(fd, "w", closefd=False), write_through=True)
    setattr(sys, name, fresh)
    return fresh


def is_file_target(path: str | None) -> bool:
    """Whether ``path`` names a file (not standard output): a confirmation line is worth printing."""
    return path is not None and path != STDOUT


def _replace_atomically(target: Path, text: str | bytes) -> None:
    # A short temporary name: the target's own name may already be near the 255-byte limit.
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=_TEMP_PREFIX, suffix=_TEMP_SUFFIX)
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
