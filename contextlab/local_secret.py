"""The secret key of a local checkout, kept in a file under ``VAR_DIR`` (``make run`` creates it).

Production sets ``SECRET_KEY`` in the environment. A local ``make run`` has no such variable:
rather than a published development key, it gets a random key generated once, written with
mode 0600 to ``$VAR_DIR/secret_key`` and read back by every process of that checkout (web
server, worker, ``manage.py`` commands), so sessions survive restarts. This module imports
nothing from Django: the settings module and the dev launcher both use it.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from pathlib import Path


def secret_key_file(environ: Mapping[str, str], base_dir: Path) -> Path:
    """``SECRET_KEY_FILE`` if set, else ``$VAR_DIR/secret_key`` (``VAR_DIR`` defaults to ./var)."""
    explicit = environ.get("SECRET_KEY_FILE", "").strip()
    if explicit:
        return Path(explicit)
    return Path(environ.get("VAR_DIR") or base_dir / "var") / "secret_key"


def read_secret_key_file(path: Path) -> str | None:
    """The key stored in ``path``, or None when there is no such file or it is empty."""
    try:
        key = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    return key or None


def ensure_secret_key_file(path: Path) -> Path:
    """Create ``path`` with a fresh random key (mode 0600) unless it already holds one."""
    if read_secret_key_file(path) is not None:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(secrets.token_urlsafe(50) + "\n")
    return path
