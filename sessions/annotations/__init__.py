"""Annotations: annotators' labels beside the evidence, never inside it, and the blind they work under.
"""
