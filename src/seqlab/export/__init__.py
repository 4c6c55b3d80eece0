"""Export trained models to other inference engines."""
