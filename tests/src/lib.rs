//! Cross-crate end-to-end tests live in `tests/` of this crate; kubesim's own fidelity tests are
//! in `kubesim/tests`, and the real-client (Python, Spark) tests in `tests/python`.
