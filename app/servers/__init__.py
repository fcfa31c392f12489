"""Servers: the demo model's chat server and `oakwatch serve`'s web page.
"""
