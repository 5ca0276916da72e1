"""What the integrations share beyond their public modules: launch detection, launch plans and the
smoke test.
"""
