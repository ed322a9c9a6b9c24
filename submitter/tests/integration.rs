//! Every integration test of the package, in one test binary: one link of the package and its
//! dependencies instead of one per file, and shared code compiled once. Each file of this folder
//! is a module below; nextest still runs each test in a process of its own. A file missing from
//! this list fails the codemap test
//! `every_test_file_is_a_module_of_its_packages_one_test_binary` (tests/tests/codemap.rs).

mod operate_support;
mod service_support;
mod submit_support;

mod bad_input;
mod client_operate;
mod client_retry;
mod id_claims;
mod openapi_drift;
mod request_counts;
mod service_audit;
mod service_auth;
mod service_fairness;
mod service_faults;
mod service_follow;
mod service_kill;
mod service_killed;
mod service_list;
mod service_logs;
mod service_pod_security;
mod service_quota;
mod service_revocation;
mod service_submit;
mod service_submit_tls;
mod service_tls;
mod status_lookup;
