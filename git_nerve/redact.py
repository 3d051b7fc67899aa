"""The one redaction of what an agent printed, wherever git-nerve stores or shows it (round logs, thread rounds and
posts, `git worker run`'s capture, the setup log, the console's agent output, `show`).

Two kinds of values are masked (and, for their callers, one key the caller holds: :func:`one`; the credentials in
a URL: :func:`url_credentials`):

* the values (``MIN_SECRET`` characters or more) of the environment variables whose names say they are secret
  (``*KEY*``, ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``...) that the agent was given: ``[redacted]``;
* the values of a ``.env``-style file copied into the task's worktree (``worktree_prep``), which git-nerve keeps only
  as salted hashes: ``[value from <file> hidden by git-nerve]``. Where the worktree still holds the file, each of
  its values whose hash was recorded at the copy is known in memory for the time of the masking (a plain
  replace: ~1 ms per MB); a value no longer found there (the worktree removed, the file changed) is looked for by
  its hash: every place a value may begin (the start of a line, every change between word and other characters)
  hashed at each recorded length, ~2-4 s per MB of text on this machine, so only when some value could not be
  recovered.

Floor 0: standard library only, nothing of git_nerve (the bus row that holds the hashes is read by
:func:`git_nerve.worktree_prep.secrets.redactor`).
"""

from __future__ import annotations

import os
import re

#: environment variable names whose values are secrets
SECRET_NAME = r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH(?!OR)"
#: shortest environment value masked (shorter ones would hide ordinary words)
MIN_SECRET = 6
ENV_MASK = "[redacted]"


def copied_mask(src: str) -> str:
    return f"[value from {src} hidden by git-nerve]"


def one(text: str, value: str | None, mask: str = ENV_MASK, shortest: int = 1) -> str:
    """``text`` with one secret the caller holds (an API key it sends: the http adapter's, the embeddings
    endpoint's) masked, when it is ``shortest`` characters or more."""
    return text.replace(value, mask) if value and len(value) >= shortest and text else text


def url_credentials(text: str) -> str:
    """``https://user:token@host`` -> ``https://***@host``: credentials in a URL (a remote's, in git's output)
    never reach the bus, a log or a message."""
    return re.sub(r"(://)[^/@\s]+@", r"\1***@", text)


def env_secrets(env=None) -> list[str]:
    """The values of ``env`` (default: this process's) that must never be stored or shown, longest first."""
    found = {v for k, v in (os.environ if env is None else env).items()
             if isinstance(v, str) and len(v) >= MIN_SECRET and re.search(SECRET_NAME, k, re.I)}
    return sorted(found, key=len, reverse=True)


def digest(salt: bytes, value: str) -> str:
    """The recorded form of a copied value: HMAC-SHA256(salt, value), hex."""
    import hashlib  # here: a command that masks nothing copied never needs them (start-up)
    import hmac

    return hmac.new(salt, value.encode("utf-8"), hashlib.sha256).hexdigest()


def by_length(hashes: list[list]) -> dict[int, dict[str, str]]:
    """``[length, digest, file]`` rows as {length: {digest: file}}."""
    table: dict[int, dict[str, str]] = {}
    for n, h, src in hashes:
        table.setdefault(int(n), {})[h] = src
    return table


class _Hmac:
    """HMAC-SHA256 under one salt with its two padded-key states computed once (about 3 times cheaper per value
    than ``hmac.new``: the scan by hash makes one per place and length)."""

    def __init__(self, salt: bytes):
        import hashlib

        key = (hashlib.sha256(salt).digest() if len(salt) > 64 else salt).ljust(64, b"\0")
        self._inner = hashlib.sha256(bytes(b ^ 0x36 for b in key))
        self._outer = hashlib.sha256(bytes(b ^ 0x5C for b in key))

    def __call__(self, data: bytes) -> bytes:
        inner = self._inner.copy()
        inner.update(data)
        outer = self._outer.copy()
        outer.update(inner.digest())
        return outer.digest()


def _starts(line: str) -> list[int]:
    """Where a value may begin: the start of the line and every change between word and other characters."""
    return [i for i in range(len(line)) if i == 0 or line[i - 1].isalnum() != line[i].isalnum()
            or not line[i].isalnum()]


def _find_hashed(line: str, mac: _Hmac, table: dict[int, dict[bytes, str]]) -> tuple[int, int, str] | None:
    """(where, length, file) of the first value of ``table`` (by its hash) that ``line`` holds, or None."""
    data = line.encode("utf-8", "surrogateescape") if line.isascii() else None  # ASCII: slices of the bytes
    for i in _starts(line):
        for n, known in table.items():
            if i + n <= len(line):
                found = known.get(mac(data[i:i + n] if data is not None
                                      else line[i:i + n].encode("utf-8", "surrogateescape")))
                if found:
                    return i, n, found
    return None


class Redactor:
    """Masks the secret environment values ``env`` and the copied values it knows literally (``copied``: value ->
    the file it was copied from) or only by hash (``salt``, {length: {hex digest: file}}). False when it has
    nothing to mask (the usual case: masking is then free)."""

    def __init__(self, env=(), copied: dict[str, str] | None = None, salt: bytes | None = None,
                 hashed: dict[int, dict[str, str]] | None = None):
        masks = {v: ENV_MASK for v in env}
        masks.update({v: copied_mask(src) for v, src in (copied or {}).items()})
        self._literal = sorted(masks.items(), key=lambda kv: len(kv[0]), reverse=True)
        self._bytes = [(v.encode("utf-8", "surrogateescape"), m.encode()) for v, m in self._literal]
        self._copied = dict(copied or {})
        self._mac = _Hmac(salt) if salt and hashed else None
        self._hashed = {n: {bytes.fromhex(h): src for h, src in t.items()} for n, t in (hashed or {}).items() if t}
        if self._mac is None:
            self._hashed = {}

    @classmethod
    def of_env(cls, env=None) -> "Redactor":
        return cls(env_secrets(env))

    def __bool__(self) -> bool:
        return bool(self._literal or self._hashed)

    def find(self, line: str) -> tuple[int, int, str] | None:
        """(where, length, file) of a copied value ``line`` holds (the first known literally, else the first by
        hash), or None: the rule of the secret checks (git_nerve/worktree_prep/secrets.py)."""
        hits = [(i, len(v), src) for v, src in self._copied.items() if (i := line.find(v)) >= 0]
        if hits:
            return min(hits)
        return _find_hashed(line, self._mac, self._hashed) if self._hashed and self._mac else None

    def text(self, text: str) -> str:
        if not self or not text:
            return text
        for value, mask in self._literal:
            text = text.replace(value, mask)
        if self._hashed:
            text = "\n".join(self._line(line) for line in text.split("\n"))
        return text

    def _line(self, line: str) -> str:
        out = ""
        while (found := _find_hashed(line, self._mac, self._hashed)) is not None:  # type: ignore[arg-type]
            i, n, src = found
            out += line[:i] + copied_mask(src)
            line = line[i + n:]
        return out + line

    def data(self, data: bytes) -> bytes:
        if not self or not data:
            return data
        for value, mask in self._bytes:
            data = data.replace(value, mask)
        if self._hashed:
            text = data.decode("utf-8", "surrogateescape")
            data = "\n".join(self._line(line) for line in text.split("\n")).encode("utf-8", "surrogateescape")
        return data

    def value(self, obj):
        """``obj`` (JSON-like: str, list, dict) with every string in it masked."""
        if not self:
            return obj
        if isinstance(obj, str):
            return self.text(obj)
        if isinstance(obj, list):
            return [self.value(v) for v in obj]
        if isinstance(obj, dict):
            return {k: self.value(v) for k, v in obj.items()}
        return obj

    def held(self, data: bytes) -> int:
        """How many bytes at the end of ``data`` could begin a value (a stream holds them back for its next read)."""
        held = 0
        for value, _mask in self._bytes:
            for k in range(min(len(value) - 1, len(data)), held, -1):
                if data.endswith(value[:k]):
                    held = k
                    break
        if self._hashed:
            held = max(held, min(len(data), max(self._hashed) * 4 - 1))  # up to 4 bytes per character
        return held

    def literal_only(self) -> "Redactor":
        """The same without the scan by hash (a reader of what was already masked as it was written)."""
        out = Redactor()
        out._literal, out._bytes, out._copied = self._literal, self._bytes, self._copied
        return out


NOTHING = Redactor()

__all__ = ["ENV_MASK", "MIN_SECRET", "NOTHING", "Redactor", "SECRET_NAME", "by_length", "copied_mask", "digest",
           "env_secrets", "one", "url_credentials"]
