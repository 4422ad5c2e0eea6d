"""The boundary objects of one speculative-decoding step, each with the rules it obeys."""
