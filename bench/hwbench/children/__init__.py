"""Scripts run as fresh child processes (stdlib and hwbackends only)."""
