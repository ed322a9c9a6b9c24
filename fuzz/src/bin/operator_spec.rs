//! Fuzz target `operator_spec`: see [`fuzz::operator_spec`] for the property it checks.

fn main() {
    afl::fuzz!(|data: &[u8]| fuzz::operator_spec(data));
}
