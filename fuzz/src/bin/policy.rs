//! Fuzz target `policy`: see [`fuzz::policy`] for the property it checks.

fn main() {
    afl::fuzz!(|data: &[u8]| fuzz::policy(data));
}
