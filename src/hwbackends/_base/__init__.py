"""The bottom layer: records, errors, versions, settings, bounded file reads, the plugin guard and
the value types of the Backend contract. Imports nothing above it.
"""
