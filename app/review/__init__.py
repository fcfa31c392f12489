"""Review: the console over an evidence folder, finished (review) or growing elsewhere (attach).
"""
