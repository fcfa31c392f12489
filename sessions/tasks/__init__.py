"""Tasks (seed 003): task files run as experiments of their own, and batches of them.
"""
