"""Review's own panes: the scrubber, a decision's response, memory as it stood, annotation.
"""
