"""Claims of d2l.ai and the papers, measured: gradient diagnostics, kernel regression, the cost of
layers, positional encodings, attention scaling."""
