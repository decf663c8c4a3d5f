"""Bundled example traces (data only): the README's first command analyses one of them."""
