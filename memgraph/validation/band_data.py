"""Written by memgraph.validation.band.write_band_data. Do not edit: regenerate."""

ROWS = ()
