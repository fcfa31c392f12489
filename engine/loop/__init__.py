"""Loop: one trial from the canonical state to a mechanical end: the loop, its budgets, the action
contract, the agent's memory and context, routes, events, records, outcomes and the tally.
"""
