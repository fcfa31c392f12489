"""One trial's panes: frame, trace, memory, ladder, budgets, and their layout by the space they have.
"""
