//! Fuzz target `template_merge`: see [`fuzz::template_merge`] for the property it checks.

fn main() {
    afl::fuzz!(|data: &[u8]| fuzz::template_merge(data));
}
