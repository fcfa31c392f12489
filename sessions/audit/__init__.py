"""Audit: an evidence folder checked without trusting it (verify), finished after a crash (recover) and
re-run from its recorded inputs (replay).
"""
