"""Audio kept as files for Kokoro-FastAPI's `return_download_link` (GET /v1/download/{file}).

Bounded: one directory, at most DOWNLOAD_MAX_FILES files and DOWNLOAD_MAX_BYTES in all (the
oldest go first), each kept DOWNLOAD_TTL_S. File names are made here (`speech-<32 hex>.<format>`)
and a name is served only if it has exactly that shape, so no request can name a path outside
the directory. The directory is made on the first use (mode 0700) and, when it was made here
(DOWNLOAD_DIR unset), removed at shutdown.
"""
from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from .encode import FORMATS, encode_all

_NAME = re.compile(rf"^speech-[0-9a-f]{{32}}\.({'|'.join(FORMATS)})(\.json)?$")
"""A kept file, or its timing sidecar (`<file>.json`, Kokoro-FastAPI's return_timing)."""
ROUTE = "/v1/download/"


@dataclass
class Download:
    """A file promised to a response (its path goes out in a header before the audio exists)."""

    store: DownloadStore
    name: str
    fmt: str

    @property
    def path(self) -> str:
        return ROUTE + self.name

    @property
    def timing_path(self) -> str:
        return ROUTE + self.name + ".json"

    async def write(self, pcm: bytes) -> None:
        data = await asyncio.to_thread(encode_all, self.fmt, pcm)
        await asyncio.to_thread(self.store.put, self.name, data)

    async def write_timing(self, chunks: list[dict]) -> None:
        """Kokoro-FastAPI's timing sidecar: {"chunks": [{"text", "start", "end"}, ...]} in seconds
        of the audio, one entry per segment (a pause's text is "")."""
        data = json.dumps({"chunks": chunks}).encode()
        await asyncio.to_thread(self.store.put, self.name + ".json", data)


class DownloadStore:
    def __init__(self, directory: Path | None, max_files: int, max_bytes: int, ttl_s: float):
        self._given = directory
        self._dir: Path | None = None
        self.max_files, self.max_bytes, self.ttl_s = max_files, max_bytes, ttl_s

    @property
    def directory(self) -> Path:
        if self._dir is None:
            if self._given is not None:
                self._given.mkdir(parents=True, exist_ok=True, mode=0o700)
                self._dir = self._given
            else:
                self._dir = Path(tempfile.mkdtemp(prefix="speech-downloads-"))
        return self._dir

    def reserve(self, fmt: str) -> Download:
        return Download(self, f"speech-{uuid.uuid4().hex}.{fmt}", fmt)

    def put(self, name: str, data: bytes) -> None:
        d = self.directory
        tmp = d / f".{name}.tmp"
        tmp.write_bytes(data)
        os.replace(tmp, d / name)  # a reader sees the whole file or none
        self._evict(keep=name)

    def _entries(self) -> list[tuple[float, int, Path]]:
        out = []
        for p in self.directory.iterdir():
            if _NAME.match(p.name):
                try:
                    st = p.stat()
                except FileNotFoundError:
                    continue
                out.append((st.st_mtime, st.st_size, p))
        return sorted(out)

    def _evict(self, keep: str | None = None) -> None:
        entries = self._entries()
        now = time.time()
        total = sum(size for _, size, _ in entries)
        count = len(entries)
        for mtime, size, p in entries:  # oldest first
            expired = now - mtime > self.ttl_s
            if not expired and count <= self.max_files and total <= self.max_bytes:
                break
            if p.name == keep and not expired:
                continue
            p.unlink(missing_ok=True)
            count -= 1
            total -= size

    def find(self, name: str) -> Path | None:
        """The file for a /v1/download name, or None (bad shape, never written, evicted, expired)."""
        if not _NAME.match(name) or self._dir is None:
            return None
        p = self._dir / name
        try:
            if time.time() - p.stat().st_mtime > self.ttl_s:
                p.unlink(missing_ok=True)
                return None
        except FileNotFoundError:
            return None
        return p

    @staticmethod
    def save_as(requested: str | None, stored: str) -> str:
        """Kokoro-FastAPI's ?name= on a download: the save-as name (Content-Disposition), reduced
        to letters, digits, '.', '_' and '-', at most 100 characters, with the stored file's own
        extension; the stored name when nothing is left."""
        if not requested:
            return stored
        stem = re.sub(r"\.[A-Za-z0-9]{1,5}$", "", re.sub(r"[^A-Za-z0-9._-]+", "_", requested))
        stem = stem.strip("._-")[:100].strip("._-")
        ext = stored[len("speech-") + 32:]  # ".wav" or ".wav.json"
        return stem + ext if stem else stored

    def close(self) -> None:
        if self._dir is not None and self._given is None:
            shutil.rmtree(self._dir, ignore_errors=True)
