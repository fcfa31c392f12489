"""Games: declarative game definitions, the probe that reads them, the milestone ladder, goals,
information tracks, frozen controls and Parcel Quest's tables.
"""
