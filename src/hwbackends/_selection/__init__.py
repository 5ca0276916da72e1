"""Selection: probing, choosing, the report, the selection cache, and the resolved target the
integrations work from.
"""
