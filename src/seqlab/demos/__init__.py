"""Self-contained demonstrations behind ``seqlab demo NAME``."""
