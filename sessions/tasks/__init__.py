"""Tasks (seed 003): task files run as experiments of their own, and batches of them; difficulty knobs
that derive harder battle tasks (task_knobs) and a battle task's game data as JSON (task_data).
"""
