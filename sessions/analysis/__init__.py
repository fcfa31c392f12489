"""Analysis: the protocol's figures from an evidence folder (metrics, summary, hand scoring), the report
and its plots, and the exports (Inspect AI logs, frames as PNG).
"""
