"""The built-in model zoo: one JSON file per model (published config + default inputs)."""
