"""A standard PNG of a frame, written directly: 8-bit RGB, no filtering, one zlib stream.

The evidence's frame store keeps every decision-boundary frame this way, and a model sees the
screen this way (enlarged by a whole factor); both are lossless. zlib at level 1 costs a fifth
of Pillow's PNG encoder on Game Boy frames.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
ZLIB_LEVEL = 1


def _chunk(tag: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(data, zlib.crc32(tag)))


def encode_png(rgb: np.ndarray) -> bytes:
    """A standard PNG of an (H, W, 3) uint8 frame: filter type 0 on every row, one IDAT."""
    height, width = rgb.shape[:2]
    rows = np.empty((height, 1 + width * 3), np.uint8)
    rows[:, 0] = 0
    rows[:, 1:] = rgb.reshape(height, width * 3)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (PNG_SIGNATURE + _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib.compress(rows, ZLIB_LEVEL))
            + _chunk(b"IEND", b""))


def enlarged(rgb: np.ndarray, scale: int) -> np.ndarray:
    """Each pixel as a scale x scale block (nearest neighbour: no new colours, nothing lost)."""
    if scale == 1:
        return rgb
    return np.repeat(np.repeat(rgb, scale, axis=0), scale, axis=1)
