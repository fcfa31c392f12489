"""Bench: `oakwatch bench`, every performance target next to what this run measured.
"""
