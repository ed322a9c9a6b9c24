//! Fuzz target `submit_body`: see [`fuzz::submit_body`] for the property it checks.

fn main() {
    afl::fuzz!(|data: &[u8]| fuzz::submit_body(data));
}
