"""Serve plotly.js from the installed ``plotly`` package instead of a copy in the repository.

The template asks for ``vendor/plotly.min.js``; this finder answers with the file the Python
package ships, so the JavaScript always matches the Python figures and is never fetched from a
CDN (and 4.8 MB of minified code stays out of the repository).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import plotly
from django.contrib.staticfiles.finders import BaseFinder
from django.core.files.storage import FileSystemStorage

PLOTLY_DIR = Path(plotly.__file__).resolve().parent / "package_data"
FILES = {"vendor/plotly.min.js": PLOTLY_DIR / "plotly.min.js"}


class PackageAssetFinder(BaseFinder):
    def find(self, path: str, find_all: bool = False, **kwargs: Any) -> Any:  # type: ignore[override]
        target = FILES.get(path)
        if target is None or not target.exists():
            return []  # what the built-in finders answer when they have nothing
        return [str(target)] if find_all else str(target)

    def list(self, ignore_patterns: Any) -> Iterator[tuple[str, FileSystemStorage]]:
        storage = FileSystemStorage(location=str(PLOTLY_DIR))
        storage.prefix = "vendor"  # type: ignore[attr-defined]
        for target in FILES.values():
            if target.exists():
                yield target.name, storage
