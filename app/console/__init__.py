"""Console: the live displays of a run (the Textual console, the headless printer, the workers' console).
"""
