"""Analyses the notes make: gradient diagnostics, kernel regression, the cost of layers."""
