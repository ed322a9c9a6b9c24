//! Every integration test of the package, in one test binary: one link of the package and its
//! dependencies instead of one per file, and shared code compiled once. Each file of this folder
//! is a module below; nextest still runs each test in a process of its own. A file missing from
//! this list fails the codemap test
//! `every_test_file_is_a_module_of_its_packages_one_test_binary` (tests/tests/codemap.rs).

mod e2e_support;
mod real_spark_support;

mod chaos;
mod codemap;
mod demo;
mod e2e_driver_objects;
mod e2e_executor_quota;
mod e2e_leader;
mod e2e_operator;
mod e2e_parity;
mod e2e_quota;
mod e2e_recovery;
mod e2e_writes;
mod real_spark;
mod real_spark_connect;
mod real_spark_kubeflow_examples;
mod real_spark_packages;
mod real_spark_recovery;
