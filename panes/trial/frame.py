"""Frame pane: the live emulator frame, drawn with half blocks by our own Line API widget.

Each terminal cell shows two pixels: "▀" with the top pixel as foreground and the bottom
pixel as background. The frame is scaled (nearest neighbour, numpy) to fit the pane; each
row pair is packed into int64 keys, diffed against the previous frame, and only changed
rows are refreshed. Styles are cached in a bounded dict; equal neighbouring cells are merged
into one segment. The pane pulls the latest frame on a timer (at most `fps`), so frames the
run produces faster than that are dropped, never queued.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

import numpy as np
from rich.color import Color
from rich.segment import Segment
from rich.style import Style
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.geometry import Region, Size
from textual.message import Message
from textual.strip import Strip
from textual.widget import Widget

HALF = "▀"
STYLE_CACHE_LIMIT = 4096


class FrameLike(Protocol):
    frame: np.ndarray
    decision_id: int
    frame_sha256: str
    frame_index: int
    version: int


def pack_rgb(pixels: np.ndarray) -> np.ndarray:
    """(H, W, 3) uint8 -> (H, W) int64 0xRRGGBB."""
    p = pixels.astype(np.int64)
    return (p[..., 0] << 16) | (p[..., 1] << 8) | p[..., 2]


def native_scale(width: int, height: int, cells_w: int, cells_h: int) -> int:
    """The largest whole-number scale (at least 1) at which the frame's width fits cells_w cells."""
    return max(1, min(cells_w // max(1, width), (2 * cells_h) // max(1, height)) if cells_w >= width else 1)


def sample_indices(width: int, height: int, cells_w: int, cells_h: int, mode: str = "fit"):
    """(rows, cols) source pixel indices drawn in a cells_w x cells_h pane (rows even in number).

    "fit": the whole frame scaled (nearest neighbour) to fit. "native": whole pixels (1:1 or a
    larger whole-number scale); what does not fit is cut, keeping the bottom rows (where the
    games draw their dialogue boxes) and the middle columns."""
    if mode != "native":
        tw, th = fit_size(width, height, cells_w, cells_h)
        return ((np.arange(th) * height // th).astype(np.intp), (np.arange(tw) * width // tw).astype(np.intp))
    k = native_scale(width, height, cells_w, cells_h)
    tw = min(cells_w, width * k)
    th = min(2 * cells_h, height * k)
    th -= th % 2
    rows = (height * k - th + np.arange(th)) // k
    cols = ((width * k - tw) // 2 + np.arange(tw)) // k
    return rows.astype(np.intp), cols.astype(np.intp)


def fit_size(width: int, height: int, cells_w: int, cells_h: int) -> tuple[int, int]:
    """Pixel size (w, h, h even) of a width x height frame scaled to fit cells_w x cells_h cells."""
    if cells_w <= 0 or cells_h <= 0:
        return 0, 0
    scale = min(cells_w / width, (2 * cells_h) / height)
    w = max(1, min(cells_w, int(width * scale)))
    h = max(2, min(2 * cells_h, int(height * scale)))
    return w, h - (h % 2)


class FrameView(Widget):
    """A half-block picture of an RGB numpy frame; only changed rows are repainted."""

    DEFAULT_CSS = """
    FrameView { width: 1fr; height: 1fr; }
    """

    def __init__(self, *, name: str | None = None, id: str | None = None, classes: str | None = None):
        super().__init__(name=name, id=id, classes=classes)
        self._frame: np.ndarray | None = None
        self._keys: np.ndarray | None = None  # (rows, w) int64: top << 24 | bottom
        self._strips: list[Strip | None] = []
        self._styles: dict[int, Style] = {}
        self._index_cache: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
        self._layout_key: tuple = ()
        self.frames_shown = 0  # frames converted and scheduled for painting
        self.frames_painted = 0  # frames whose rows the compositor actually asked for
        self.rows_refreshed = 0
        self._painted_version = 0
        self._pad_style: Style | None = None  # widget.rich_style is recomputed after every refresh
        self.mode = "fit"  # or "native": whole pixels, cut to the pane (the zoom)

    def set_mode(self, mode: str) -> None:
        if mode != self.mode:
            self.mode = mode
            if self._frame is not None:
                self._convert(full=True)

    @property
    def shown(self) -> tuple[int, int, int, int]:
        """(source pixels across, source pixels down, cells across, cells down) of the picture drawn."""
        if self._frame is None or self._keys is None:
            return 0, 0, 0, 0
        rows, cols = self._indices
        return len(np.unique(cols)), len(np.unique(rows)), self._keys.shape[1], self._keys.shape[0]

    # -- data in ---------------------------------------------------------------------------
    def show(self, frame: np.ndarray) -> None:
        """Draw a new frame; rows identical to the previous frame are not repainted."""
        self._frame = frame
        self._convert(full=False)

    def on_resize(self) -> None:
        if self._frame is not None:
            self._convert(full=True)

    def _convert(self, full: bool) -> None:
        frame = self._frame
        cw, ch = self.size.width, self.size.height
        if frame is None or cw <= 0 or ch <= 0:
            return
        fh, fw = frame.shape[:2]
        key = (fw, fh, cw, ch, self.mode)
        idx = self._index_cache.get(key)
        if idx is None:
            if len(self._index_cache) > 16:
                self._index_cache.clear()
            idx = sample_indices(fw, fh, cw, ch, self.mode)
            self._index_cache[key] = idx
        self._indices = idx
        rows, cols = idx
        tw, th = len(cols), len(rows)
        packed = pack_rgb(frame[rows][:, cols])
        keys = (packed[0::2] << 24) | packed[1::2]
        layout = (cw, ch, tw, th)
        top = (ch - th // 2) // 2
        if full or self._keys is None or self._layout_key != layout:
            self._keys = keys
            self._strips = [None] * keys.shape[0]
            self._layout_key = layout
            self.frames_shown += 1
            self.refresh()
            return
        changed = np.flatnonzero((keys != self._keys).any(axis=1))
        if changed.size == 0:
            return
        self._keys = keys
        self.frames_shown += 1
        self.rows_refreshed += int(changed.size)
        regions = []
        for y in changed.tolist():
            self._strips[y] = None
            regions.append(Region(0, top + y, cw, 1))
        self.refresh(*regions)

    # -- Line API --------------------------------------------------------------------------
    def _style(self, key: int) -> Style:
        style = self._styles.get(key)
        if style is None:
            if len(self._styles) >= STYLE_CACHE_LIMIT:
                self._styles.clear()
            t, b = key >> 24, key & 0xFFFFFF
            style = Style(color=Color.from_rgb(t >> 16, (t >> 8) & 255, t & 255),
                          bgcolor=Color.from_rgb(b >> 16, (b >> 8) & 255, b & 255))
            self._styles[key] = style
        return style

    def _row_strip(self, y: int, width: int, pad: Style) -> Strip:
        row = self._keys[y]
        n = row.shape[0]
        starts = np.concatenate(([0], np.flatnonzero(row[1:] != row[:-1]) + 1))
        lengths = np.diff(np.concatenate((starts, [n])))
        left = (width - n) // 2
        segments = [Segment(" " * left, pad)] if left > 0 else []
        values = row[starts].tolist()
        for value, length in zip(values, lengths.tolist(), strict=True):
            segments.append(Segment(HALF * length, self._style(value)))
        right = width - n - left
        if right > 0:
            segments.append(Segment(" " * right, pad))
        return Strip(segments, width)

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        pad = self._pad_style
        if pad is None:
            pad = self._pad_style = self.rich_style
        if self._keys is None:
            return Strip.blank(width, pad)
        rows = self._keys.shape[0]
        top = (self.size.height - rows) // 2
        r = y - top
        if r < 0 or r >= rows:
            return Strip.blank(width, pad)
        if self._painted_version != self.frames_shown:
            self._painted_version = self.frames_shown
            self.frames_painted += 1
        strip = self._strips[r]
        if strip is None:
            strip = self._strips[r] = self._row_strip(r, width, pad)
        return strip

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips = [None] * len(self._strips)  # padding follows the theme
        self._pad_style = None

    def get_content_width(self, container: Size, viewport: Size) -> int:
        return container.width

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return container.height


class Caption(Widget):
    """One line of text that repaints without a layout pass (it changes with every frame). Given
    shorter versions too, it draws the longest that fits its width."""

    DEFAULT_CSS = """
    Caption { height: 1; width: 1fr; text-align: center; }
    """

    def __init__(self, text: str = "", *, id: str | None = None):
        super().__init__(id=id)
        self.text = text  # the whole caption
        self.shorter: tuple[str, ...] = ()

    def set(self, text: str, *shorter: str) -> None:
        if text != self.text or shorter != self.shorter:
            self.text, self.shorter = text, shorter
            self.refresh()

    @property
    def shown(self) -> str:
        width = self.size.width
        return next((t for t in (self.text, *self.shorter) if len(t) <= width), (self.shorter or (self.text,))[-1])

    def render(self) -> Content:
        return Content(self.shown)


class FramePane(Vertical):
    """The frame, with its decision index and frame hash beneath it; pulls on a timer.

    With `protocol` ("tgp" for the Kitty graphics protocol, "sixel"), the frame is sent to the
    terminal as an image at full resolution (panes.trial.image_frame); otherwise it is drawn with half
    blocks. Either way a frame is converted only when its version changes, at most `fps` times a
    second (at most IMAGE_FPS for an image protocol, where each frame is an encoded picture)."""

    DEFAULT_CSS = """
    FramePane { height: 1fr; }
    """
    ALLOW_MAXIMIZE = True
    can_focus = True  # tab to it, then m maximises it

    class AspectChanged(Message):
        """The frame's width over height changed (the layout sizes the frame's column by it)."""

    def __init__(self, source: Callable[[], FrameLike | None] | None = None, *, fps: float | None = 30.0,
                 protocol: str | None = None, id: str | None = None, classes: str | None = None):
        super().__init__(id=id, classes=classes)
        self.aspect = 160 / 144  # the frame's width over its height in pixels (a Game Boy's until one is shown)
        self.source = source
        self.fps = fps
        self.protocol = protocol
        self._version = -1
        self.clock: Callable[[], float] = time.monotonic  # the rate limit's clock (a test steps its own)
        self._shown_at = float("-inf")
        self._min_interval = 0.0
        self.zoom = ""  # "", "fit" (whole frame, whole screen) or "native" (whole pixels)
        self._caption = "waiting for the first frame…"
        self._shown: FrameLike | None = None
        self.border_title = "Frame"

    def compose(self) -> ComposeResult:
        if self.protocol:
            from panes.trial.image_frame import IMAGE_FPS, ImageFrameView

            self._min_interval = 1 / IMAGE_FPS
            yield ImageFrameView(self.protocol, id="frame-view")
        else:
            yield FrameView(id="frame-view")
        yield Caption(self._caption, id="frame-caption")

    def on_mount(self) -> None:
        self._timer = None
        if self.source is not None:
            self.pull()
            if self.fps:  # None: whoever holds the pane drives pull() (the console's tick)
                self._timer = self.set_interval(1 / self.fps, self.pull, name="frame-pull")

    def set_fps(self, fps: float) -> None:
        """Change the pull rate (the console lowers it while the run goes at maximum speed)."""
        if fps == self.fps:
            return
        self.fps = fps
        if getattr(self, "_timer", None) is not None:
            self._timer.stop()
            self._timer = self.set_interval(1 / fps, self.pull, name="frame-pull")

    @property
    def view(self):
        """The FrameView (half blocks) or the ImageFrameView (an image protocol)."""
        return self.query_one("#frame-view")

    def set_zoom(self, zoom: str) -> None:
        """"" normal, "fit" or "native": the half-block view's sampling (an image is always whole)."""
        self.zoom = zoom
        self.set_class(bool(zoom), "-zoomed")
        view = self.view
        if isinstance(view, FrameView):
            view.set_mode("native" if zoom == "native" else "fit")
        self._set_caption()

    def pull(self) -> None:
        snap = self.source() if self.source else None
        if snap is None or snap.version == self._version:
            return
        if self._min_interval:
            now = self.clock()
            if now - self._shown_at < self._min_interval:
                return  # not consumed: the next pull shows the newest frame
            self._shown_at = now
        self.show(snap)

    def show(self, snap: FrameLike) -> None:
        views, captions = self.query("#frame-view"), self.query(Caption)
        if not views or not captions:
            return  # not composed yet (a tick can come first): the next pull shows it
        self._version = snap.version
        self._shown = snap
        height, width = snap.frame.shape[:2]
        if height and width / height != self.aspect:
            self.aspect = width / height
            self.post_message(self.AspectChanged())
        views.first().show(snap.frame)
        self._set_caption()

    def _set_caption(self) -> None:
        captions = self.query(Caption)
        if not captions:
            return
        lead = {"fit": "ZOOM fit · f: 1:1 · ", "native": "ZOOM 1:1, bottom rows kept · f: back · "}.get(self.zoom, "")
        snap = self._shown
        if snap is None:
            captions.first().set(lead + self._caption)
            return
        d, i, sha = snap.decision_id, snap.frame_index, snap.frame_sha256
        captions.first().set(*(lead + text for text in (
            f"decision {d} · frame {i} · {sha[:16]}", f"decision {d} · frame {i} · {sha[:8]}",
            f"decision {d} · frame {i}", f"d{d} · frame {i}", f"d{d}")))
