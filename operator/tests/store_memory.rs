//! The memory backend passes the same conformance suite as the real ones.

mod store_support;

use std::sync::Arc;

use operator::progress_store::memory::MemoryStore;

store_support::conformance_cases!(async { ((), Arc::new(MemoryStore::new())) });
