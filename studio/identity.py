"""Who is calling: owner tokens the server signs, so no client can claim someone else's sessions.

An owner is a random id; what a browser or an API client holds is `<owner>.<mac>`, the id signed with
a key kept in the data folder (`.secrets/owner.key`, created on first run, 0600, never served). The
server derives the owner from a token it can verify and ignores any owner a client merely names, so a
restart keeps every browser's sessions (the key persists) and forging an owner needs the key.

- Browsers keep their token in `gr.BrowserState`. Gradio encrypts that local-storage value with a
  secret it sends to the page; `browser_state_secret` is derived from the key (so a restart can still
  read what browsers stored) but is not the key, and holding it forges nothing.
- API clients and the command line use the machine's own token (`.secrets/cli.token`, printed by
  `studio token`), sent as `Authorization: Bearer <token>`; `studio render --session` records its
  sessions under the same owner, so a browser opened with `?key=<token>` sees them.
- Rotating the key (`studio token --rotate`, after a token leaked) orphans no one at once: a key ring.
  New tokens and URLs are signed with the new key; tokens signed with a retired-to-be key
  (`.secrets/owner.keys.old`) are still accepted, and a page that loads with one gets the same owner
  re-signed (`refresh`), until `studio token --retire` drops the old keys. The browser-state secret
  is kept in its own file, so a rotation does not make browsers forget what they stored.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
from pathlib import Path
from typing import Any

_TOKEN = re.compile(r"^([A-Za-z0-9_-]{16,64})\.([0-9a-f]{32})$")
HEADER = "authorization"
ALT_HEADER = "x-studio-token"


class Identity:
    def __init__(self, data_dir: str | Path) -> None:
        self.dir = Path(data_dir) / ".secrets"
        self.dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.dir, 0o700)
        _read_or_create(self.dir / "owner.key", lambda: secrets.token_hex(32))
        self._seen: tuple[int, int] | None = None
        self._keys: list[bytes] = []
        # Derived from the first key, then kept: a rotation must not change it (browsers would lose state).
        self._browser_secret = _read_or_create(self.dir / "browser-state.secret", lambda: hmac.new(
            self._ring()[0], b"gradio-browser-state", hashlib.sha256).hexdigest()[:32])

    def _ring(self) -> list[bytes]:
        """[current key, *old keys still accepted], re-read when a file changed (`studio token --rotate`
        or `--retire` from another process)."""
        stamp = tuple(_mtime(self.dir / n) for n in ("owner.key", "owner.keys.old"))
        if stamp != self._seen:
            current = (self.dir / "owner.key").read_text(encoding="ascii").strip()
            old = _lines(self.dir / "owner.keys.old")
            self._keys, self._seen = [bytes.fromhex(k) for k in [current, *old]], stamp  # type: ignore[assignment]
        return self._keys

    @property
    def _key(self) -> bytes:
        return self._ring()[0]

    def _mac(self, owner: str, key: bytes | None = None) -> str:
        return hmac.new(key or self._key, b"owner:" + owner.encode(), hashlib.sha256).hexdigest()[:32]

    def new_token(self) -> str:
        """A token for a new owner (a browser seen for the first time)."""
        return self.token_for(secrets.token_urlsafe(18))

    def token_for(self, owner: str) -> str:
        return f"{owner}.{self._mac(owner)}"

    def _verified(self, token: Any) -> tuple[str, bool] | None:
        """(owner, signed with the current key) for a token of any key in the ring, else None."""
        if not isinstance(token, str) or len(token) > 128:
            return None
        m = _TOKEN.match(token.strip())
        if m is None:
            return None
        for i, key in enumerate(self._ring()):
            if hmac.compare_digest(m.group(2), self._mac(m.group(1), key)):
                return m.group(1), i == 0
        return None

    def owner_of(self, token: Any) -> str | None:
        """The owner a token proves, or None for anything this server did not sign (or retired)."""
        got = self._verified(token)
        return got[0] if got else None

    def refresh(self, token: Any) -> str | None:
        """A valid token signed with an old key -> the same owner's token under the current key; None
        when the token is current already or invalid."""
        got = self._verified(token)
        return self.token_for(got[0]) if got and not got[1] else None

    def rotate(self) -> None:
        """A new current key; the old one is still accepted until `retire`. The machine's own token is
        re-signed for the same owner."""
        owner = self.cli_owner()
        ring = self._ring()
        _write_secret(self.dir / "owner.keys.old", "".join(k.hex() + "\n" for k in ring))
        _write_secret(self.dir / "owner.key", secrets.token_hex(32) + "\n")
        _write_secret(self.dir / "cli.token", self.token_for(owner) + "\n")

    def retire(self) -> int:
        """Drop every old key: tokens and URLs signed with them stop working. Returns how many."""
        n = len(self._ring()) - 1
        (self.dir / "owner.keys.old").unlink(missing_ok=True)
        self._seen = None
        return n

    def sign(self, purpose: str, *parts: str, key: bytes | None = None) -> str:
        """A MAC over `parts` for one purpose (a live-audio URL, say): only this server can make it."""
        msg = "\0".join((purpose, *parts)).encode()
        return hmac.new(key or self._key, b"sign:" + msg, hashlib.sha256).hexdigest()[:32]

    def verify(self, mac: Any, purpose: str, *parts: str) -> bool:
        return isinstance(mac, str) and any(hmac.compare_digest(mac, self.sign(purpose, *parts, key=k))
                                            for k in self._ring())

    @property
    def browser_state_secret(self) -> str:
        return self._browser_secret

    def cli_token(self) -> str:
        """This machine's own token (API scripts, `studio render`), created once."""
        return _read_or_create(self.dir / "cli.token", self.new_token)

    def cli_owner(self) -> str:
        owner = self.owner_of(self.cli_token())
        if owner is None:  # the key was replaced under an old token file: issue a fresh one
            (self.dir / "cli.token").unlink(missing_ok=True)
            owner = self.owner_of(self.cli_token())
        assert owner is not None
        return owner

    def from_request(self, request: Any) -> str | None:
        """The owner an HTTP request proves with `Authorization: Bearer <token>` (or X-Studio-Token)."""
        try:
            headers = {k.lower(): v for k, v in dict(request.headers).items()} if request is not None else {}
        except Exception:  # noqa: BLE001 - no headers: no identity
            return None
        value = headers.get(HEADER, "")
        if value.lower().startswith("bearer "):
            return self.owner_of(value[7:])
        return self.owner_of(headers.get(ALT_HEADER))


def _mtime(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except FileNotFoundError:
        return 0


def _lines(path: Path) -> list[str]:
    try:
        return [x.strip() for x in path.read_text(encoding="ascii").splitlines() if x.strip()]
    except FileNotFoundError:
        return []


def _write_secret(path: Path, text: str) -> None:
    """Replace a secret file atomically, 0600."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(text)
    tmp.replace(path)


def _read_or_create(path: Path, make: Any) -> str:
    """The file's text; created atomically (0600) on first use, so two studios starting agree."""
    try:
        return path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        pass
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(make() + "\n")
    try:
        os.link(tmp, path)  # fails if another process made it first: then theirs is the one
    except FileExistsError:
        pass
    finally:
        tmp.unlink(missing_ok=True)
    return path.read_text(encoding="ascii").strip()
