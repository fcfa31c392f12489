"""Variants: held-out Parcel Quest worlds (tables, files, a solver) and the suites that run on them.
"""
