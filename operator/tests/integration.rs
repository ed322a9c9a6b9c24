//! Every integration test of the package, in one test binary: one link of the package and its
//! dependencies instead of one per file, and shared code compiled once. Each file of this folder
//! is a module below; nextest still runs each test in a process of its own. A file missing from
//! this list fails the codemap test
//! `every_test_file_is_a_module_of_its_packages_one_test_binary` (tests/tests/codemap.rs).

mod store_support;

mod agent_api;
mod crd_yaml;
mod docs;
mod fence_model;
mod store_kube;
mod store_memory;
mod store_redis;
mod store_redis_cluster;
