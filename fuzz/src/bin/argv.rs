//! Fuzz target `argv`: see [`fuzz::argv`] for the property it checks.

fn main() {
    afl::fuzz!(|data: &[u8]| fuzz::argv(data));
}
