"""Preflight: every input of a run read, checked and hashed before anything is written (manifest, YAML,
ROMs, start states, game definitions, prices, script notes, implementation identity).
"""
