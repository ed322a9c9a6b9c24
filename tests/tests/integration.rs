//! Every integration test of the package, in one test binary: one link of the package and its
//! dependencies instead of one per file, and shared code compiled once. Each file of this folder
//! is a module below; nextest still runs each test in a process of its own. A file missing from
//! this list fails `every_test_file_is_a_module_of_the_binary`.

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

/// `Cargo.toml` turns off test discovery (`autotests = false`), so a new file would otherwise not run.
#[test]
fn every_test_file_is_a_module_of_the_binary() {
    let declared = include_str!("integration.rs");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("the tests folder is readable") {
        let path = entry.expect("a folder entry").path();
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        let is_test_file = path.extension().is_some_and(|e| e == "rs") && stem != "integration";
        if is_test_file && !declared.contains(&format!("\nmod {stem};\n")) {
            missing.push(stem.to_owned());
        }
    }
    assert!(
        missing.is_empty(),
        "test files not declared in tests/integration.rs: {missing:?}"
    );
}
