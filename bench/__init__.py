"""Benchmarks: `make bench` runs every section and writes bench/RESULTS.md."""
