"""Evidence: the folder a run writes (layout, records, recorder, frame store, durable writes, sums, roots,
digest, mirror) and the code that reads it back.
"""
