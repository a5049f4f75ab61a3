"""The images a report embeds from its results folder: reconstructions, originals, exposure figures.

A results folder may be untrusted (copied from elsewhere, edited by hand), and a row names the
files it wants shown. Each is read through `privaudit.files.read_inside`, so it must be a regular
file below the folder reached without a link (not `/etc/passwd`, not a FIFO that hangs the report,
not a sparse 4 GiB file), at most `IMAGE_BYTES` long and a PNG; and the page embeds at most
`PAGE_BYTES` of them in all, so a thousand rows naming the largest file allowed still give a page a
browser opens. What cannot be shown is a note in its place, saying why.
"""

from __future__ import annotations

import base64
from pathlib import Path

from privaudit.errors import PrivauditError
from privaudit.files import read_inside

IMAGE_BYTES = 8 * 2**20
"""The largest image embedded (the suite's own are a few kB: a reconstruction, an exposure figure)."""
PAGE_BYTES = 64 * 2**20
"""The most image bytes one page embeds (base64 adds a third)."""
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class Images:
    """The PNG files of one results folder, embedded as data URIs within the page's budget."""

    def __init__(self, results_dir: str | Path, budget: int = PAGE_BYTES) -> None:
        self.results_dir = Path(results_dir)
        self.left = budget

    def embed(self, relative: str | None, what: str) -> dict[str, str]:
        """`{"uri": …}` for the image at `relative` (a path inside the results folder, as rows
        record it), or `{"note": …}` saying why it is not shown."""
        if not relative:
            return {"note": f"no {what} stored"}
        try:
            data = read_inside(self.results_dir, relative, IMAGE_BYTES, what)
        except FileNotFoundError:
            return {"note": f"image missing: {relative}"}
        except PrivauditError as error:
            return {"note": f"image not shown: {error}"}
        if not data.startswith(PNG_SIGNATURE):
            return {"note": f"image unreadable: {relative} (not a PNG file)"}
        if len(data) > self.left:
            return {"note": f"image not shown: {relative} (the page already embeds {PAGE_BYTES // 2**20} MB of "
                            "images)"}
        self.left -= len(data)
        return {"uri": "data:image/png;base64," + base64.b64encode(data).decode("ascii")}
