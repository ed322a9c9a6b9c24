//! The memory backend passes the same conformance suite as the real ones.

use crate::store_support;

use std::sync::Arc;

use sandbox::memory_store::MemoryStore;

store_support::conformance_cases!(async { ((), Arc::new(MemoryStore::new())) });
