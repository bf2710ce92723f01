"""Model spec: what to build (zoo entry, config.json, or a callable) and how to train it."""
