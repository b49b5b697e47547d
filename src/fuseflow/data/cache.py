"""Graph files fetched from a URL on first use and kept in a cache directory, checked by SHA-256.

A remote dataset is named by its URL with the expected checksum in the fragment, the convention
pip uses: `https://example.org/graphs/dblp.npz#sha256=<64 hex digits>`. The first use downloads
it into the data directory (`--data-dir`, else `$FUSEFLOW_DATA`, else `$XDG_CACHE_HOME/fuseflow`
or `~/.cache/fuseflow`), into a temporary file that is renamed only once its checksum matches;
later uses read the cached copy without network access.

    >>> url, digest = split_url("https://example.org/g.npz#sha256=" + "ab" * 32)
    >>> url, digest[:6]
    ('https://example.org/g.npz', 'ababab')
    >>> cache_dir("/tmp/graphs").as_posix()
    '/tmp/graphs'
"""
from __future__ import annotations

import hashlib
import os
import re
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from ..errors import UserError
from ..memory import Budget
from .catalogue import sha256_of

URL_SCHEMES = ("http://", "https://")
_DIGEST = re.compile(r"[0-9a-f]{64}")
CHUNK = 1 << 16


def is_url(text: str) -> bool:
    return str(text).startswith(URL_SCHEMES)


def cache_dir(data_dir=None) -> Path:
    """Where downloaded datasets are kept: `data_dir`, else `$FUSEFLOW_DATA`, else the user's
    cache directory."""
    if data_dir is not None:
        return Path(data_dir)
    if os.environ.get("FUSEFLOW_DATA"):
        return Path(os.environ["FUSEFLOW_DATA"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "fuseflow"


def split_url(text: str) -> tuple[str, str]:
    """(URL without fragment, expected SHA-256) of `URL#sha256=HEX`; a URL without a checksum is
    refused, since nothing else would tell a changed or truncated file from the real one."""
    url, _, fragment = str(text).partition("#")
    key, _, digest = fragment.partition("=")
    if key != "sha256" or not _DIGEST.fullmatch(digest.lower()):
        raise UserError("a dataset URL needs its SHA-256 in the fragment", url,
                        "append #sha256=<64 hex digits> (sha256sum FILE prints it)")
    if not urllib.parse.urlparse(url).path.endswith(".npz"):
        raise UserError("a dataset URL must name an .npz graph file", url, "see docs/datasets.md for the format")
    return url, digest.lower()


def cached_name(url: str, digest: str) -> str:
    """File name of a URL's copy in the cache: its own name plus part of its checksum."""
    stem = Path(urllib.parse.urlparse(url).path).stem or "graph"
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", stem)
    return f"{stem}-{digest[:12]}.npz"


def fetch(text: str, data_dir=None, budget: Budget | None = None, timeout: float = 60.0) -> Path:
    """The local copy of `URL#sha256=HEX`, downloaded into the cache on first use."""
    url, digest = split_url(text)
    directory = cache_dir(data_dir)
    target = directory / cached_name(url, digest)
    if target.is_file() and sha256_of(target) == digest:
        return target
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UserError(f"cannot create the data directory ({err.strerror})", str(directory),
                        "pass --data-dir DIR or set FUSEFLOW_DATA to a writable directory") from None
    budget = budget or Budget()
    handle, temp = tempfile.mkstemp(prefix=".download-", suffix=".npz", dir=directory)
    try:
        with os.fdopen(handle, "wb") as out:
            got = _download(url, out, budget, timeout)
        if got != digest:
            raise UserError(f"downloaded file has SHA-256 {got}, expected {digest}", url,
                            "check the URL and its checksum; nothing was kept")
        os.replace(temp, target)
    finally:
        if os.path.exists(temp):
            os.unlink(temp)
    return target


def _download(url: str, out, budget: Budget, timeout: float) -> str:
    """Stream `url` into `out`; returns the hex SHA-256 of what was written."""
    digest = hashlib.sha256()
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            declared = response.headers.get("Content-Length")
            if declared and declared.isascii() and declared.isdigit():
                budget.check(int(declared), f"download of {url}")
            written = 0
            for block in iter(lambda: response.read(CHUNK), b""):
                written += len(block)
                budget.check(written, f"download of {url}")
                digest.update(block)
                out.write(block)
    except urllib.error.HTTPError as err:
        raise UserError(f"download failed: HTTP {err.code} {err.reason}", url) from None
    except (urllib.error.URLError, OSError, ValueError) as err:
        reason = getattr(err, "reason", None) or getattr(err, "strerror", None) or err
        raise UserError(f"download failed: {reason}", url, "check the address and your network") from None
    if written == 0:
        raise UserError("download failed: the server sent no data", url)
    return digest.hexdigest()
