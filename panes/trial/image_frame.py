"""The frame at full resolution over a terminal image protocol (Kitty graphics or Sixel), with
the `textual-image` package; the half-block FrameView (panes.trial.frame) is the fallback.

Whether the terminal speaks a protocol is asked once, before the console starts (textual-image
queries the terminal on import, and once Textual reads stdin it cannot): `frame_protocol()`.
It answers None (half blocks) when stdout or stdin is not a terminal (tests, snapshots, pipes),
when OAKWATCH_FRAME=halfblock, or when the terminal answers neither query. OAKWATCH_FRAME=kitty
or =sixel forces a protocol on a terminal (the answer can be lost through tmux or ssh).

Each new frame is scaled by whole pixels (nearest neighbour, so pixel art stays sharp) to the
size the widget draws it at, then handed to textual-image as a PIL image; the widget repaints
without a layout pass unless that size changed. FramePane calls `show` only for a new frame
version, at most IMAGE_FPS times a second.
"""

from __future__ import annotations

import os
import sys

import numpy as np
from textual.app import ComposeResult
from textual.widget import Widget

ENV = "OAKWATCH_FRAME"
IMAGE_FPS = 15.0  # each frame is a PNG (Kitty) or a Sixel stream written to the terminal
_FORCED = {"kitty": "tgp", "tgp": "tgp", "sixel": "sixel"}
_OFF = {"halfblock", "half-block", "halfblocks", "blocks", "off", "none", "0"}


def frame_protocol(env: dict | None = None, stdout=None, stdin=None) -> str | None:
    """"tgp", "sixel" or None (half blocks). Call before the app starts: it may query the terminal."""
    env = os.environ if env is None else env
    stdout = sys.__stdout__ if stdout is None else stdout
    stdin = sys.__stdin__ if stdin is None else stdin
    choice = str(env.get(ENV, "")).strip().lower()
    if choice in _OFF:
        return None
    try:
        tty = bool(stdout and stdout.isatty() and stdin and stdin.isatty())
    except (ValueError, OSError):  # a closed stream
        tty = False
    if not tty:
        return None
    if choice in _FORCED:
        return _FORCED[choice]
    try:  # the import asks the terminal (Sixel first, then the Kitty protocol), 0.1 s each at most
        from textual_image.renderable import Image as best
        from textual_image.renderable import SixelImage, TGPImage
    except Exception:
        return None
    if best is TGPImage:
        return "tgp"
    if best is SixelImage:
        return "sixel"
    return None


def image_class(protocol: str):
    """The textual-image widget for a protocol ("tgp", "sixel"; "halfcell"/"unicode" for tests)."""
    from textual_image import widget

    return {"tgp": widget.TGPImage, "sixel": widget.SixelImage, "halfcell": widget.HalfcellImage,
            "unicode": widget.UnicodeImage}[protocol]


def cell_pixels() -> tuple[int, int]:
    """A terminal cell's size in pixels (asked of the terminal once; 10x20 when it does not say)."""
    from textual_image._terminal import get_cell_size

    size = get_cell_size()
    return max(1, size.width), max(1, size.height)


def scaled_size(fw: int, fh: int, cells_w: int, cells_h: int, cell: tuple[int, int]) -> tuple[int, int]:
    """The pixel size a fw x fh frame is drawn at in cells_w x cells_h cells (aspect kept)."""
    pw, ph = cells_w * cell[0], cells_h * cell[1]
    if pw <= 0 or ph <= 0:
        return 0, 0
    scale = min(pw / fw, ph / fh)
    return max(1, int(fw * scale)), max(1, int(fh * scale))


class ImageFrameView(Widget):
    """An RGB numpy frame as a terminal image, centred in the pane."""

    DEFAULT_CSS = """
    ImageFrameView { width: 1fr; height: 1fr; align: center middle; }
    ImageFrameView > * { width: auto; height: auto; }
    """

    def __init__(self, protocol: str, *, id: str | None = None, classes: str | None = None):
        super().__init__(id=id, classes=classes)
        self.protocol = protocol
        self._frame: np.ndarray | None = None
        self._drawn_size: tuple[int, int] = (0, 0)
        self.frames_shown = 0
        self.mode = "fit"  # an image is always drawn whole, at the terminal's own resolution

    def compose(self) -> ComposeResult:
        yield image_class(self.protocol)(id="frame-image")

    @property
    def image_widget(self):
        return self.query_one("#frame-image")

    def set_mode(self, mode: str) -> None:
        self.mode = mode

    def on_resize(self) -> None:
        if self._frame is not None:
            self._draw(self._frame, relayout=True)

    def show(self, frame: np.ndarray) -> None:
        self._frame = frame
        self._draw(frame, relayout=False)

    def _draw(self, frame: np.ndarray, relayout: bool) -> None:
        from PIL import Image as PILImage

        fh, fw = frame.shape[:2]
        cw, ch = self.size.width, self.size.height
        if cw <= 0 or ch <= 0:
            return
        w, h = scaled_size(fw, fh, cw, ch, cell_pixels())
        if w <= 0 or h <= 0:
            return
        picture = PILImage.fromarray(np.ascontiguousarray(frame[..., :3]), "RGB")
        if (w, h) != (fw, fh):
            picture = picture.resize((w, h), PILImage.Resampling.NEAREST)
        self.frames_shown += 1
        target = self.image_widget
        if relayout or (w, h) != self._drawn_size or target.image is None:
            self._drawn_size = (w, h)
            target.image = picture  # textual-image's setter: a layout pass (and, for Sixel, a recompose)
            return
        # Same size: swap the picture and repaint, no layout pass (and no recompose for Sixel).
        target._image = picture
        for child in target.children:  # Sixel draws from a child widget holding the picture
            if hasattr(child, "image"):
                child.image = picture
                child.refresh()
        target.refresh()
