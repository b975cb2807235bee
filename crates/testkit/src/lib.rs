//! Test support: real processes for the tests and the benchmark.
