"""The gallery (docs/gallery.md): small PNG copies of the figures (rule gallery runs
``python -m fedgdp.plan shrink-png SRC DST``)."""
from __future__ import annotations

import os
import sys

GALLERY_DIR = "docs/gallery"
GALLERY_RUN = "paper"    # the run the gallery (docs/gallery.md) shows: target gallery refuses any other
GALLERY_WIDTH = 900      # pixels of a gallery PNG
GALLERY_COLOURS = 128    # palette size of a gallery PNG (keeps each file at tens of KB)


def shrink_png(src: str | os.PathLike, dst: str | os.PathLike, width: int = GALLERY_WIDTH,
               colours: int = GALLERY_COLOURS) -> None:
    """A small copy of a figure's PNG for the gallery: ``width`` pixels wide, a
    palette of ``colours``, its text metadata kept (written atomically).

    Parameters
    ----------
    src : str or path-like
        The figure's PNG.
    dst : str or path-like
        The gallery PNG to write.
    width : int, default=GALLERY_WIDTH
        Width in pixels (the height keeps the aspect ratio).
    colours : int, default=GALLERY_COLOURS
        Palette size.
    """
    from PIL import Image, PngImagePlugin

    from ..common.io import atomic_path

    with Image.open(src) as img:
        info = PngImagePlugin.PngInfo()
        for key, value in (img.text or {}).items():  # type: ignore[attr-defined]  # a PNG file has .text
            info.add_text(key, value)
        img = img.convert("RGB")  # type: ignore[assignment]
        height = round(img.height * width / img.width)
        small = img.resize((width, height), Image.LANCZOS).quantize(colours, method=Image.FASTOCTREE)  # type: ignore[attr-defined]  # the constants are kept at runtime
    with atomic_path(dst) as tmp:
        small.save(tmp, format="PNG", optimize=True, pnginfo=info)


def main(argv: list[str] | None = None) -> int:
    """``python -m fedgdp.plan shrink-png SRC DST``: a gallery PNG (rule gallery).

    Parameters
    ----------
    argv : list of str or None, default=None
        ``["shrink-png", SRC, DST]``; None: ``sys.argv[1:]``.
    """
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 3 or argv[0] != "shrink-png":
        print("usage: python -m fedgdp.plan shrink-png SRC DST", file=sys.stderr)
        return 2
    shrink_png(argv[1], argv[2])
    return 0
