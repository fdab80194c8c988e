"""A secret value in a render: `[secret hmac=<16 hex digits> keyid=<8 hex digits>]` in its
place, so that `--diff` sees it change, with nothing in the render to recover it from.

Why a digest under a key that never enters a render:

- A plain hash (SHA-256 of the value) is recovered by hashing guesses, and a token or a
  repository URL is often few guesses away (a short token, one of a team's repositories).
- A salt written into the render (an HMAC keyed with it, or a slow KDF) only slows the
  guessing down: whoever reads the render has the salt too.
- Comparing the values themselves needs both in one process, but `--diff` compares with files
  an earlier process wrote; keeping the value there, even encrypted, needs a key kept
  elsewhere just the same.

So the digest is HMAC-SHA256 under a 256-bit random key made once per user and kept outside
any render: `$XDG_STATE_HOME/gpu-cluster/secret-digest.key` (`~/.local/state/...` when
XDG_STATE_HOME is unset), mode 0600. Without the key, a digest tells nothing about the value but
equality: the same value under the same key gives the same digest, which is what `--diff`
needs (it also shows that two places hold the same secret). 64 bits of it are kept: a change
goes unseen with probability 2^-64.

The trade-off: renders compare secrets only when made under the same key (the same user on
the same machine, or the key file copied along). `keyid` (32 bits of an HMAC of a constant
under the key: nothing of the key itself) tells keys apart, and `--diff` says it cannot compare
rather than report changes. Whoever can read the key file can test guesses against renders
made under it: the account that set the values, which holds them already.

A value the offline render does not know (a stack file's `secure:` ciphertext, which it cannot
decrypt) stays `[secret]`: with nothing to digest, a change to it is not seen.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import re
import secrets
import tempfile
from pathlib import Path
from typing import Any

from gpu_cluster.offline.stack_files import SECRET_PLACEHOLDER

MARKER = re.compile(r"\[secret hmac=(?P<hmac>[0-9a-f]{16}) keyid=(?P<keyid>[0-9a-f]{8})\]")
_KEY_BYTES = 32


class SecretDigestError(Exception):
    """The key cannot be read or made; the message names its file."""


def key_file() -> Path:
    """Where the key is kept (XDG Base Directory: state data, kept across runs)."""
    state = os.environ.get("XDG_STATE_HOME")
    if not state:
        try:
            state = str(Path.home() / ".local" / "state")
        except RuntimeError:  # no HOME, and no password entry to find it in
            raise SecretDigestError(
                "no home directory to keep the key for secret digests in: set XDG_STATE_HOME"
            ) from None
    return Path(state) / "gpu-cluster" / "secret-digest.key"


def _read(path: Path) -> bytes:
    content = path.read_bytes()
    with contextlib.suppress(ValueError):  # not ASCII, not hex digits
        key = bytes.fromhex(content.decode("ascii"))
        if len(key) == _KEY_BYTES:
            return key
    raise SecretDigestError(
        f"{path}: not a key for secret digests ({_KEY_BYTES * 2} hex digits); delete it to "
        "make a new one (renders made under the old one then no longer compare their secrets)"
    )


def _read_or_make(path: Path) -> bytes:
    with contextlib.suppress(FileNotFoundError):
        return _read(path)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, made = tempfile.mkstemp(dir=path.parent, prefix=".secret-digest.key.")  # mode 0600
    try:
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_hex(_KEY_BYTES) + "\n")
        # A link, not a rename: a key another render made meanwhile stays, and both renders
        # are made under it.
        with contextlib.suppress(FileExistsError):
            os.link(made, path)
    finally:
        os.unlink(made)
    return _read(path)


class SecretDigests:
    """Markers for one render's secret values; the key is read (or made) at the first value
    the render knows, so a render without one never touches the key file."""

    def __init__(self) -> None:
        self._key: bytes | None = None

    def _loaded_key(self) -> bytes:
        if self._key is None:
            path = key_file()
            try:
                self._key = _read_or_make(path)
            except OSError as exc:
                raise SecretDigestError(
                    f"cannot keep the key for secret digests in {path} ({exc.strerror}); "
                    "set XDG_STATE_HOME to a directory you can write"
                ) from None
        return self._key

    def marker(self, value: Any) -> str:
        """What the render shows for secret `value`."""
        if value == SECRET_PLACEHOLDER:
            return SECRET_PLACEHOLDER
        key = self._loaded_key()
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        # Separate inputs for values and the key id: the key id is no value's digest.
        digest = hmac.new(key, b"value\0" + text.encode(), hashlib.sha256).hexdigest()
        keyid = hmac.new(key, b"keyid\0", hashlib.sha256).hexdigest()
        return f"[secret hmac={digest[:16]} keyid={keyid[:8]}]"
