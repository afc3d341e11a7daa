"""CPU stand-in for the SGLang server (stdlib only; runs in a Debian image with nothing but python3)."""
