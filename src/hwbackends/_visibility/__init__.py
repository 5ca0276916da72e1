"""The visibility engine: rule kinds and one reader per runtime; pure, given a rule, an environment
and devices.
"""
