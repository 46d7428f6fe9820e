"""One pass over a data file, at C speed: its checksum, its line count and its UTF-8 checked, a
gzip file inflated on the way (:func:`scan_file`). What :class:`zoo.data.ParallelCorpus` records
of each file, so that a problem is named (file, line) before training starts."""

import dataclasses
import glob
import hashlib
import os
import zlib

__all__ = ["FileRecord", "matching_files", "scan_file"]

_CHUNK = 1 << 20
GZIP_MAGIC = b"\x1f\x8b"  # how a gzip file starts
UTF8_BOM = b"\xef\xbb\xbf"


@dataclasses.dataclass(frozen=True)
class FileRecord:
    """What a scan found of one file: where it is, its bytes, their SHA-256, its lines."""

    path: str
    size: int
    sha256: str
    lines: int
    gzipped: bool

    def identity(self):
        """The record without the path: what another machine's copy must also have."""
        return {"name": os.path.basename(self.path), "size": self.size, "sha256": self.sha256,
                "lines": self.lines}  # fmt: skip


def matching_files(pattern, flag):
    """The files a command-line path or glob names (a glob's matches sorted); ``flag`` (the
    flag that gave it) and the pattern are named when there is none."""
    pattern = os.path.expanduser(os.fspath(pattern))
    if not glob.has_magic(pattern):
        if not os.path.isfile(pattern):
            raise FileNotFoundError(f"{flag} {pattern}: no such file")
        return [pattern]
    paths = sorted(p for p in glob.glob(pattern) if os.path.isfile(p))
    if not paths:
        raise FileNotFoundError(f"{flag} {pattern}: no file matches")
    return paths


def scan_file(path):
    """Read ``path`` once: its checksum, its line count (as ``tf.data.TextLineDataset``
    counts: a last line without its newline counts), its UTF-8 checked.

    Raises:
        FileNotFoundError: no such file.
        ValueError: invalid UTF-8 (the file, the line and the byte), a gzip file that is
            truncated or corrupt.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such file")
    digest = hashlib.sha256()
    counter = _LineCounter(path)
    with open(path, "rb") as f:
        head = f.read(2)
        inflate = _Gunzip(path) if head == GZIP_MAGIC else None
        chunk = head + f.read(_CHUNK - 2)
        while chunk:
            digest.update(chunk)
            counter.add(inflate.text(chunk) if inflate else chunk)
            chunk = f.read(_CHUNK)
    if inflate:
        inflate.finish()
    return FileRecord(path, os.path.getsize(path), digest.hexdigest(), counter.finish(),
                      inflate is not None)  # fmt: skip


class _Gunzip:
    """The text of a gzip file, chunk by chunk, across concatenated gzip members."""

    def __init__(self, path):
        self.path, self.inflate = path, zlib.decompressobj(wbits=31)

    def text(self, chunk):
        out = []
        try:
            out.append(self.inflate.decompress(chunk))
            while self.inflate.eof and self.inflate.unused_data:  # another member follows
                rest, self.inflate = self.inflate.unused_data, zlib.decompressobj(wbits=31)
                out.append(self.inflate.decompress(rest))
        except zlib.error as error:
            raise ValueError(f"{self.path}: not a readable gzip file ({error})") from None
        return b"".join(out)

    def finish(self):
        if not self.inflate.eof:
            raise ValueError(f"{self.path}: a truncated gzip file (it ends inside its "
                             "compressed data)")  # fmt: skip


class _LineCounter:
    """Counts lines and checks UTF-8 over a file's text, chunk by chunk."""

    def __init__(self, path):
        self.path, self.lines, self.pending, self.last, self.start = path, 0, b"", b"", True

    def add(self, data):
        data = self.pending + data
        if self.start and len(data) >= 3:
            data, self.start = data[3:] if data.startswith(UTF8_BOM) else data, False
        try:
            data.decode("utf-8")
            self.pending = b""
        except UnicodeDecodeError as error:
            # A character cut by the chunk's end is finished by the next chunk.
            if error.reason == "unexpected end of data" and len(data) - error.start < 4:
                data, self.pending = data[: error.start], data[error.start :]
            else:
                line = self.lines + data.count(b"\n", 0, error.start) + 1
                column = error.start - (data.rfind(b"\n", 0, error.start) + 1) + 1
                raise ValueError(
                    f"{self.path}, line {line}: invalid UTF-8 (byte 0x{data[error.start]:02x} "
                    f"at byte column {column}: {error.reason})"
                ) from None
        self.lines += data.count(b"\n")
        if data:
            self.last = data[-1:]

    def finish(self):
        if self.pending:
            raise ValueError(f"{self.path}, line {self.lines + 1}: invalid UTF-8 (the file "
                             "ends inside a character)")  # fmt: skip
        return self.lines + (1 if self.last and self.last != b"\n" else 0)
