//! Fuzz target `properties`: see [`fuzz::properties`] for the property it checks.

fn main() {
    afl::fuzz!(|data: &[u8]| fuzz::properties(data));
}
