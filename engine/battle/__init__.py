"""Battle (seed 004): a game's battle adapter, the judge of each battle call, and episodes; Gen-3 party
records (gen3_record) and the FireRed-family adapter and its judge (gen3_battle).
"""
