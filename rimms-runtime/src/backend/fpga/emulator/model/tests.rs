//! Unit tests of the model driven by exact register sequences.
