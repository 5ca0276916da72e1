"""The machine: the host model and host files (plain data), and the reader of a real machine
through the installed backends' declarations.
"""
