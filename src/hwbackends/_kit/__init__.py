"""The plugin kit's shared facts: the built-in cpu backend, the declaration-driven accelerator
backend, and the readers of the installed Transformers tables.
"""
