"""Battle (seed 004): a game's battle adapter, the judge of each battle call, and episodes.
"""
