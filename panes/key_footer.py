"""The footer of keys, fitted to the terminal's width: every key with its description where they
fit; narrower, shorter descriptions and no command-palette key (ctrl+p is in `?` help); narrower
still, the keys of least priority give way first, so `?` (help, which lists every key) and `q`
stay on screen at 80 columns."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import Footer


def key_width(key: str, description: str, compact: bool) -> int:
    """Cells a footer key takes: its key, a space, its description, and the padding or margin."""
    return len(key) + 1 + len(description) + (1 if compact else 2)


def fit_keys(keys: list[tuple[str, str, str, bool]], width: int, short: dict[str, str], priority: list[str],
             palette: int) -> tuple[list[tuple[str, str]], bool, bool]:
    """(the (action, description) pairs shown, compact, whether the palette key is) for `keys`
    (action, key display, description, enabled) in `width` cells; `palette` is the palette key's
    cells (0: none). Disabled keys give way before enabled ones, each in `priority` order."""
    def total(shown, compact) -> int:
        return sum(key_width(k, d, compact) for _, k, d, _ in shown)

    for compact, shown in ((False, keys), (True, keys), (True, [(a, k, short.get(a, d), e) for a, k, d, e in keys])):
        if total(shown, compact) + palette <= width:
            return [(a, d) for a, _, d, _ in shown], compact, bool(palette)
    rank = {action: i for i, action in enumerate(priority)}
    kept = list(shown)
    for key in sorted(shown, key=lambda k: (k[3], -rank.get(k[0], len(priority)))):
        if total(kept, True) <= width:
            break
        kept.remove(key)
    return [(a, d) for a, _, d, _ in kept], True, False


class KeyFooter(Footer):
    """A Footer that fits its keys to its width (see fit_keys); `short` maps an action to its short
    description, `priority` lists actions from the last to give way to the first."""

    def __init__(self, short: dict[str, str], priority: list[str], **kwargs):
        super().__init__(**kwargs)
        self.short = short
        self.priority = priority
        self._fitted_width = 0

    def on_resize(self) -> None:
        if self.size.width != self._fitted_width and self._bindings_ready:
            self.call_after_refresh(self.recompose)

    def compose(self) -> ComposeResult:
        self._fitted_width = width = self.size.width or self.app.size.width
        widgets = list(super().compose())  # Footer's keys (with compact bound), fitted below
        keys, palette = [], 0
        for widget in widgets:
            if not hasattr(widget, "action"):  # a group's label (the console has no groups)
                continue
            if widget.has_class("-command-palette"):
                palette = key_width(widget.key_display, widget.description, True) + 1  # and its left border
            else:
                keys.append((widget.action, widget.key_display, widget.description, not widget.has_class("-disabled")))
        shown, compact, with_palette = fit_keys(keys, width, self.short, self.priority, palette)
        self.compact = compact
        descriptions = dict(shown)
        for widget in widgets:
            if not hasattr(widget, "action"):
                yield widget
            elif widget.has_class("-command-palette"):
                if with_palette:
                    yield widget
            elif widget.action in descriptions:
                widget.description = descriptions[widget.action]
                yield widget
