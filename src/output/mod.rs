//! The faces that print: tshark-like text, JSON / JSONL.
