"""Presentations (seed 003): which screens a model request carries.

`current` (the default): the current screen, with the action results the track shows; with
`screenshot_recall: K` also the screens of the previous K decisions, oldest first. `before-after`: the
screen before the last decision's actions and the screen after them (the current one). A condition
freezes its presentation in the manifest; the images are in the request body, so in its prompt hash.
The screens are the ones the policy was shown at earlier decisions (a decision's retries add none).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

Presentation = Literal["current", "before-after"]
PRESENTATIONS: tuple[str, ...] = ("current", "before-after")


@dataclass(frozen=True)
class PresentationRules:
    presentation: Presentation = "current"
    recall: int | None = None  # screenshot_recall: earlier screens besides the current one

    def __post_init__(self) -> None:
        if self.recall is not None and (self.recall < 1 or self.presentation != "current"):
            raise ValueError("screenshot_recall is at least 1 and goes with presentation current only")

    @property
    def images(self) -> int:
        """The most images one request carries."""
        return 2 if self.presentation == "before-after" else 1 + (self.recall or 0)

    @property
    def plain(self) -> bool:
        return self.images == 1


class ScreenHistory:
    """The screens shown at earlier decisions, as PNGs (encoded once), and what a request says of them."""

    def __init__(self, rules: PresentationRules, encode):
        self.rules = rules
        self._encode = encode  # frame -> PNG bytes, the policy's own (same scale as the current screen)
        self._shown: list[tuple[int, bytes]] = []  # (decision id, PNG), oldest first
        self._current: tuple[int, np.ndarray] | None = None

    def earlier(self, decision_id: int, frame: np.ndarray) -> tuple[tuple[tuple[str, bytes], ...], str]:
        """The earlier screens this decision's request carries (caption, PNG), and the prompt's line."""
        if self._current is not None and self._current[0] != decision_id:  # a new decision: keep the last one
            self._shown.append((self._current[0], self._encode(self._current[1])))
            del self._shown[:-max(self.rules.images - 1, 1)]
        self._current = (decision_id, frame)
        if self.rules.presentation == "before-after":
            if not self._shown:
                return (), "The current screen is attached (there is no earlier action yet)."
            return ((f"The screen before your last actions (decision {self._shown[-1][0]}):", self._shown[-1][1]),), \
                ("Attached: the screen before your last decision's actions, then the screen after them (the "
                 "current screen).")
        k = self.rules.recall or 0
        kept = self._shown[-k:] if k else []
        if not kept:
            return (), ("The current screen is attached." if not k else
                        f"The current screen is attached (no earlier screenshot yet; up to {k} are recalled).")
        images = tuple((f"Your screenshot at decision {d}:", png) for d, png in kept)
        return images, (f"Attached: your screenshots of the last {len(kept)} decision(s) (of up to {k}), oldest "
                        f"first, then the current screen.")
