"""Policies that choose actions. Every one answers in the action contract's JSON."""
