//! The SparkApplication operator. Not built yet: the binary says so and fails, rather than
//! pretending to run.

fn main() -> std::process::ExitCode {
    eprintln!("operator: not implemented yet (see the open operator issues)");
    std::process::ExitCode::from(2)
}
