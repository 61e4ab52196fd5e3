"""Diagnosis: the course knowledge (techniques, tree, pitfalls, order) and the decision tree
that maps measured symptoms to the next technique to try."""
