"""Emulators: the interface the loop drives, its PyBoy and mGBA backends, ROM headers, frames as PNG.
"""
